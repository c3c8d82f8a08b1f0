//! One pair of `phantom diff`: its tensors read (shards joined), shapes made to agree (transposition, truncation,
//! sums), compared with the tolerance of its lower-precision element type.

use super::report::{PairReport, PairStatus};
use super::{inspect, reconcile, DiffOptions, Named, Side};
use crate::compare::compare;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// Reads every part of `n`; when there are several, decides against the other side's tensor when known
/// (replicated copies or partial sums, [`reconcile::whole_on_every_rank`]), else joins shards (to its shape).
pub(super) fn read(
    n: &Named,
    other: Option<&Tensor>,
    transforms: &mut Vec<String>,
    side: &str,
) -> Result<Tensor> {
    let parts: Vec<Tensor> = n
        .parts
        .iter()
        .map(|(_, _, i)| i.load.read())
        .collect::<Result<_>>()?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    if let Some((t, said)) = other.and_then(|o| reconcile::whole_on_every_rank(&parts, o)) {
        transforms.push(format!("{side}: {said}"));
        return Ok(t);
    }
    let want = other.map(|o| o.shape());
    // No axis gives the other side's shape: join along the first that fits, and let the other transformations try.
    let (t, axis) = reconcile::join(&parts, want)
        .or_else(|_| reconcile::join(&parts, None))
        .map_err(Error::Usage)?;
    transforms.push(format!(
        "{side}: {} shards joined along axis {axis} → {:?}",
        parts.len(),
        t.shape()
    ));
    Ok(t)
}

/// The tensors of a pair (shards joined), read; an unreadable tensor is an error of the whole run.
fn both(a: &Named, b: &Named, tr: &mut Vec<String>) -> Result<(Tensor, Tensor)> {
    Ok(if a.parts.len() > 1 && b.parts.len() == 1 {
        let tb = read(b, None, tr, "B")?;
        (read(a, Some(&tb), tr, "A")?, tb)
    } else {
        let ta = read(a, None, tr, "A")?;
        let other = (b.parts.len() > 1 && a.parts.len() == 1).then_some(&ta);
        let tb = read(b, other, tr, "B")?;
        (ta, tb)
    })
}

/// Shapes made to agree, or the transformations tried and why they do not.
type Agreed = std::result::Result<(Tensor, Tensor, Vec<String>), (Vec<String>, String)>;

fn shape_agreed(mut ta: Tensor, mut tb: Tensor, opts: &DiffOptions, mut tr: Vec<String>) -> Agreed {
    if ta.shape() != tb.shape() {
        if let Some(p) = reconcile::transposition(ta.shape(), tb.shape()) {
            tr.push(format!(
                "A: axes permuted {p:?} → {:?} (B's layout)",
                tb.shape()
            ));
            ta = reconcile::transpose(&ta, &p);
        }
    }
    if ta.shape() != tb.shape() && opts.truncate {
        if let Some(axis) = reconcile::single_difference(ta.shape(), tb.shape()) {
            let (na, nb) = (ta.shape()[axis], tb.shape()[axis]);
            if na > nb {
                tr.push(format!("A: truncated along axis {axis} from {na} to {nb}"));
                ta = reconcile::truncate(&ta, axis, nb);
            } else {
                tr.push(format!("B: truncated along axis {axis} from {nb} to {na}"));
                tb = reconcile::truncate(&tb, axis, na);
            }
        }
    }
    if ta.shape() != tb.shape() {
        let why = format!(
            "shapes differ: A {:?}, B {:?} (no shard join, transposition{} reconciles them)",
            ta.shape(),
            tb.shape(),
            if opts.truncate { " or truncation" } else { "" }
        );
        return Err((tr, why));
    }
    Ok((ta, tb, tr))
}

/// The lower of two float types (the one whose tolerance applies), else `b`.
fn lower(a: DType, b: DType) -> DType {
    match (a.is_float(), b.is_float()) {
        (true, true) if a.size() < b.size() || (a == DType::Bf16 && b == DType::F16) => a,
        _ => b,
    }
}

/// Compares a reconciled pair.
fn measured(
    name: &str,
    ta: &Tensor,
    tb: &Tensor,
    tr: Vec<String>,
    opts: &DiffOptions,
) -> PairReport {
    let mut r = blank(name, tr);
    r.a_shape = ta.shape().to_vec();
    r.b_shape = tb.shape().to_vec();
    r.a_dtype = ta.dtype().name().into();
    r.b_dtype = tb.dtype().name().into();
    if let Some(d) = crate::compare::strings::pair(ta, tb) {
        let (fails, reason) = crate::compare::strings::outcome(d, ("A", "B"));
        r.status = match fails {
            true => PairStatus::Fail,
            false => PairStatus::Pass,
        };
        r.reason = reason;
        return r;
    }
    let rule = opts.tolerance.resolve(lower(ta.dtype(), tb.dtype()), None);
    let a = ta.to_f64_array();
    let c = compare(&a, tb, rule.tolerance, rule.operands);
    if opts.inspect {
        let at = c
            .worst
            .as_ref()
            .map(|w| w.index.clone())
            .unwrap_or_default();
        r.view = Some(inspect::view(
            &a,
            &tb.to_f64_array(),
            &at,
            c.tolerance,
            c.metrics.scale,
        ));
    }
    r.status = if c.metrics.failed > 0 {
        PairStatus::Fail
    } else {
        PairStatus::Pass
    };
    r.mse = Some(c.metrics.rmse * c.metrics.rmse);
    r.tolerance = Some(c.tolerance);
    r.metrics = Some(c.metrics);
    r.a_stats = Some(c.reference);
    r.b_stats = Some(c.target);
    r.worst = c.worst;
    r
}

fn blank(name: &str, transforms: Vec<String>) -> PairReport {
    PairReport {
        name: name.to_string(),
        a_origin: vec![],
        b_origin: vec![],
        a_shape: vec![],
        b_shape: vec![],
        a_dtype: String::new(),
        b_dtype: String::new(),
        transforms,
        status: PairStatus::Mismatch,
        reason: None,
        tolerance: None,
        metrics: None,
        mse: None,
        a_stats: None,
        b_stats: None,
        worst: None,
        view: None,
    }
}

fn origins(n: &Named) -> Vec<String> {
    n.parts.iter().map(|(_, o, _)| o.clone()).collect()
}

/// Splits a failure to form a pair's tensors: shards that join to no shape or a sum of unequal shapes make the pair a
/// mismatch (`Ok(Err(why))`); an unreadable file ends the run.
fn pair_level<T>(r: Result<T>) -> Result<std::result::Result<T, String>> {
    match r {
        Ok(t) => Ok(Ok(t)),
        Err(Error::Usage(why)) => Ok(Err(why)),
        Err(e) => Err(e),
    }
}

/// The report of a pair from its tensors (or why they could not be formed), after the shapes are made to agree.
fn judged(
    name: &str,
    tensors: std::result::Result<(Tensor, Tensor), String>,
    tr: Vec<String>,
    opts: &DiffOptions,
) -> PairReport {
    let (ta, tb) = match tensors {
        Ok(t) => t,
        Err(why) => return mismatch(name, tr, why),
    };
    let seen = (
        ta.shape().to_vec(),
        tb.shape().to_vec(),
        ta.dtype(),
        tb.dtype(),
    );
    match shape_agreed(ta, tb, opts, tr) {
        Ok((ta, tb, tr)) => measured(name, &ta, &tb, tr, opts),
        Err((tr, why)) => {
            let mut r = mismatch(name, tr, why);
            (r.a_shape, r.b_shape) = (seen.0, seen.1);
            (r.a_dtype, r.b_dtype) = (seen.2.name().into(), seen.3.name().into());
            r
        }
    }
}

/// One pair, compared.
pub(super) fn pair(name: &str, a: &Named, b: &Named, opts: &DiffOptions) -> Result<PairReport> {
    let mut tr = vec![];
    let tensors = pair_level(both(a, b, &mut tr))?;
    let mut r = judged(name, tensors, tr, opts);
    r.a_origin = origins(a);
    r.b_origin = origins(b);
    Ok(r)
}

/// A `--sum X+Y=Z` pair: X + Y of one side against Z of the other (`None` when the names are not there).
pub(super) fn summed(
    rule: &(String, String, String),
    a: &Side,
    b: &Side,
    opts: &DiffOptions,
) -> Result<Option<PairReport>> {
    let (x, y, z) = rule;
    let found = match (a.tensors.get(x), a.tensors.get(y), b.tensors.get(z)) {
        (Some(p), Some(q), Some(w)) => Some(((p, q), w, true)),
        _ => match (b.tensors.get(x), b.tensors.get(y), a.tensors.get(z)) {
            (Some(p), Some(q), Some(w)) => Some(((p, q), w, false)),
            _ => None,
        },
    };
    let Some((parts, whole, sum_on_a)) = found else {
        return Ok(None);
    };
    let side = if sum_on_a { "A" } else { "B" };
    let mut tr = vec![format!(
        "{side}: {x} + {y} compared with the other side's {z} (--sum)"
    )];
    let tensors = pair_level((|| -> Result<(Tensor, Tensor)> {
        let p = read(parts.0, None, &mut tr, side)?;
        let q = read(parts.1, None, &mut tr, side)?;
        if p.shape() != q.shape() {
            return Err(Error::Usage(format!(
                "{x} {:?} and {y} {:?} cannot be added",
                p.shape(),
                q.shape()
            )));
        }
        let s = Tensor::from_f64(
            lower(p.dtype(), q.dtype()),
            p.to_f64_array() + q.to_f64_array(),
        )
        .ok_or_else(|| Error::Usage("sum of non-numeric tensors".into()))?;
        let w = read(whole, None, &mut tr, if sum_on_a { "B" } else { "A" })?;
        Ok(if sum_on_a { (s, w) } else { (w, s) })
    })())?;
    let mut r = judged(z, tensors, tr, opts);
    let (sum, one) = (
        [origins(parts.0), origins(parts.1)].concat(),
        origins(whole),
    );
    (r.a_origin, r.b_origin) = if sum_on_a { (sum, one) } else { (one, sum) };
    Ok(Some(r))
}

fn mismatch(name: &str, tr: Vec<String>, why: String) -> PairReport {
    let mut r = blank(name, tr);
    r.status = PairStatus::Mismatch;
    r.reason = Some(why);
    r
}
