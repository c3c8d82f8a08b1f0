//! The tables of one value in the terminal summary: its metrics (errors, ulps, tolerance used) and the activation
//! statistics of both sides.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};

use crate::report::model::{RefPrecision, ValueReport};
use crate::units::num;

pub(super) fn ulp(u: u64) -> String {
    if u == u64::MAX {
        "nan/inf".into()
    } else {
        u.to_string()
    }
}

pub(super) fn precision_tag(p: &RefPrecision) -> Option<String> {
    match p {
        RefPrecision::F64 => None,
        RefPrecision::F64Phantom => Some("ref: phantom f64 kernel".into()),
        RefPrecision::Reduced { reason } => Some(format!("reduced-precision reference: {reason}")),
        RefPrecision::Seeded { reason } => Some(format!("taken from the target: {reason}")),
        RefPrecision::Unavailable { reason } => Some(format!("reference unavailable: {reason}")),
    }
}

pub(super) fn metrics_table(v: &ValueReport) -> Option<Table> {
    let m = v.metrics.as_ref()?;
    let tol = v.tolerance?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["metric", "value", "tolerance"]);
    // With NaN/inf where the other side is finite, the magnitudes measure the finite pairs only: say so.
    let max_abs = match m.nonfinite_mismatch {
        0 => "max abs",
        _ => "max abs (finite pairs)",
    };
    let rows: Vec<(&str, String, String)> = vec![
        (
            max_abs,
            num(m.max_abs),
            format!(
                "atol {} + rtol {}·max(|ref|, rms {}{})",
                num(tol.atol),
                num(tol.rtol),
                num(m.scale),
                match tol.floor > m.scale {
                    true => format!(", its sources' {}", num(tol.floor)),
                    false => String::new(),
                }
            ),
        ),
        ("mean abs", num(m.mean_abs), String::new()),
        (
            "max rel",
            num(m.max_rel),
            format!("floor |ref| ≥ {}", num(tol.atol)),
        ),
        ("rmse", num(m.rmse), String::new()),
        ("cosine", format!("{:.9}", m.cosine), String::new()),
        (
            "snr dB",
            m.snr_db
                .map(|s| format!("{s:.1}"))
                .unwrap_or_else(|| "∞ (identical)".into()),
            String::new(),
        ),
        (
            "max ulp",
            ulp(m.max_ulp),
            format!("in {}", v.target_dtype.map(|d| d.name()).unwrap_or("?")),
        ),
        (
            "out of tol",
            format!(
                "{} of {} ({:.3}%)",
                m.failed,
                m.elements,
                100.0 * m.fail_fraction
            ),
            "0".into(),
        ),
        (
            "nan/inf mismatch",
            m.nonfinite_mismatch.to_string(),
            "0".into(),
        ),
    ];
    for (k, v, tol) in rows {
        t.add_row(vec![
            Cell::new(k),
            Cell::new(v).set_alignment(CellAlignment::Right),
            Cell::new(tol),
        ]);
    }
    Some(t)
}

pub(super) fn stats_table(v: &ValueReport) -> Option<Table> {
    let (r, g) = (v.reference_stats.as_ref()?, v.target_stats.as_ref()?);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "", "min", "max", "mean", "std", "% zero", "% inf", "% nan",
    ]);
    for (label, s) in [("reference f64", r), ("target", g)] {
        t.add_row(vec![
            label.to_string(),
            num(s.min),
            num(s.max),
            num(s.mean),
            num(s.std),
            format!("{:.2}", s.pct_zero),
            format!("{:.2}", s.pct_inf),
            format!("{:.2}", s.pct_nan),
        ]);
    }
    Some(t)
}
