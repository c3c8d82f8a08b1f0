//! The value inspector of `phantom diff --html`: per pair the values of both sides (a window of at most
//! [`CELLS`] elements around the largest difference when the tensor is bigger), rendered in a self-contained page —
//! collapsible pairs, a floating header naming both sides, cells coloured by sign and magnitude and bordered by
//! difference against the tolerance, axis selectors and sliders, jump to the largest difference, hover details.

use handlebars::Handlebars;
use ndarray::{ArrayD, Slice};
use serde::Serialize;
use serde_json::{json, Value};

use super::report::{DiffReport, PairReport, PairStatus};
use crate::compare::Tolerance;

/// The most elements per side embedded for one pair.
pub const CELLS: usize = 16384;

const TEMPLATE: &str = include_str!("inspector.html.hbs");

/// The values shown for one pair.
#[derive(Clone, Debug, Serialize)]
pub struct View {
    /// Where the window starts in the full tensor, per axis.
    pub offset: Vec<usize>,
    /// The window's shape.
    pub shape: Vec<usize>,
    pub full: Vec<usize>,
    pub elements: usize,
    /// Whether the window is smaller than the tensor.
    pub window: bool,
    pub a: Vec<Value>,
    pub b: Vec<Value>,
    /// The largest |A| in the window (the colour scale).
    pub amax: f64,
    pub atol: f64,
    pub rtol: f64,
    pub scale: f64,
}

/// Per axis, the window's (start, length): the last two axes up to 64 wide, the others as the budget allows, each
/// centred on `center` where it can be.
fn window(shape: &[usize], center: &[usize]) -> Vec<(usize, usize)> {
    let mut budget = CELLS;
    let mut out = vec![(0, 1); shape.len()];
    for k in (0..shape.len()).rev() {
        let cap = if k + 2 >= shape.len() { 64 } else { budget };
        let len = shape[k].min(cap).min(budget).max(1);
        budget = (budget / len).max(1);
        let c = center.get(k).copied().unwrap_or(0);
        let start = c.saturating_sub(len / 2).min(shape[k] - len.min(shape[k]));
        out[k] = (start, len.min(shape[k]));
    }
    out
}

fn js(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else {
        json!(if x > 0.0 { "Infinity" } else { "-Infinity" })
    }
}

/// The view of a compared pair (equal shapes), windowed around `worst`.
pub fn view(a: &ArrayD<f64>, b: &ArrayD<f64>, worst: &[usize], tol: Tolerance, scale: f64) -> View {
    let full = a.shape().to_vec();
    let whole = a.len() <= CELLS;
    let win: Vec<(usize, usize)> = if whole {
        full.iter().map(|&d| (0, d)).collect()
    } else {
        window(&full, worst)
    };
    let cut = |t: &ArrayD<f64>| -> Vec<f64> {
        t.slice_each_axis(|ax| {
            let (s, l) = win[ax.axis.index()];
            Slice::from(s..s + l)
        })
        .iter()
        .copied()
        .collect()
    };
    let (va, vb) = (cut(a), cut(b));
    let amax = va
        .iter()
        .filter(|x| x.is_finite())
        .fold(0.0f64, |m, x| m.max(x.abs()));
    View {
        offset: win.iter().map(|w| w.0).collect(),
        shape: win.iter().map(|w| w.1).collect(),
        full,
        elements: a.len(),
        window: !whole,
        a: va.into_iter().map(js).collect(),
        b: vb.into_iter().map(js).collect(),
        amax,
        atol: tol.atol,
        rtol: tol.rtol,
        scale,
    }
}

fn status(p: &PairReport) -> &'static str {
    match p.status {
        PairStatus::Pass => "pass",
        PairStatus::Fail => "fail",
        PairStatus::Mismatch => "mismatch",
    }
}

/// The self-contained HTML page.
pub fn html(r: &DiffReport) -> String {
    let first = r.verdict.first_divergent.as_deref();
    let data: Vec<Value> = r
        .pairs
        .iter()
        .map(|p| {
            json!({
                "name": p.name, "status": status(p), "first": Some(p.name.as_str()) == first,
                "view": p.view, "worst": p.worst.as_ref().map(|w| &w.index), "reason": p.reason,
                "transforms": p.transforms, "a_dtype": p.a_dtype, "b_dtype": p.b_dtype,
            })
        })
        .collect();
    let pairs: Vec<Value> = r
        .pairs
        .iter()
        .map(|p| {
            let line = match (&p.metrics, &p.reason) {
                (_, Some(why)) => why.clone(),
                (Some(m), None) => format!("max |Δ| {:.3e}, max rel {:.3e}, cosine {:.6}", m.max_abs, m.max_rel, m.cosine),
                _ => String::new(),
            };
            json!({"name": p.name, "status": status(p), "first": Some(p.name.as_str()) == first, "line": line})
        })
        .collect();
    let only = [("A", &r.only_a), ("B", &r.only_b)]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(s, v)| format!("only in {s}: {}", v.join(", ")))
        .collect::<Vec<_>>()
        .join(" · ");
    let verdict_line = match first {
        Some(f) => format!(
            "drift: {} of {} pairs diverge, first: {f}",
            r.verdict.failed + r.verdict.mismatched,
            r.pairs.len()
        ),
        None => format!("clean: all {} pairs within tolerance", r.pairs.len()),
    };
    let ctx = json!({
        "verdict": r.verdict.status, "verdict_line": verdict_line, "a": r.a.path, "b": r.b.path,
        "pairs": pairs, "only": only,
        "data": serde_json::to_string(&data).expect("serializes").replace("</", "<\\/"),
    });
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.render_template(TEMPLATE, &ctx)
        .expect("the template renders")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_stays_inside_and_holds_the_center() {
        let w = window(&[10, 300, 300], &[9, 299, 0]);
        assert_eq!(w, vec![(6, 4), (236, 64), (0, 64)]);
        assert!(w.iter().map(|x| x.1).product::<usize>() <= CELLS);
    }
}
