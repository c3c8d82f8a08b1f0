//! `phantom diff A B`: two dumps of per-layer tensors from any framework, paired by name and compared with the
//! metrics and tolerances of `phantom onnx`, streamed pair by pair (only one pair's tensors are in memory at once).

pub mod archive;
pub mod formats;
pub mod inspect;
pub mod naming;
pub mod pickle;
pub mod reconcile;
pub mod render;
pub mod report;
pub mod serve;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::compare::{compare, ToleranceSpec};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};
use formats::Item;
use naming::{Order, Rename};
use report::{DiffReport, DiffVerdict, PairReport, PairStatus, SideReport};

/// What `phantom diff` was asked.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Rules applied to both sides, then to one.
    pub rename: Vec<Rename>,
    pub rename_a: Vec<Rename>,
    pub rename_b: Vec<Rename>,
    pub order: Option<String>,
    pub stages: Vec<String>,
    pub truncate: bool,
    /// `X+Y=Z` rules: the sum of X and Y on one side against Z on the other.
    pub sums: Vec<(String, String, String)>,
    pub tolerance: ToleranceSpec,
    pub limits: archive::Limits,
    /// Keep a window of each pair's values for the HTML inspector.
    pub inspect: bool,
}

/// One named tensor of a side: its shards in rank order (one part when not sharded).
#[derive(Clone)]
struct Named {
    parts: Vec<(usize, String, Item)>,
}

/// A side: its tensors by name, and what was opened (kept alive while reading).
struct Side {
    tensors: BTreeMap<String, Named>,
    report: SideReport,
    _opened: archive::Opened,
}

fn side(path: &std::path::Path, rules: &[Rename], limits: archive::Limits) -> Result<Side> {
    let opened = archive::open(path, limits)?;
    let readable: Vec<&(String, PathBuf)> = opened
        .files
        .iter()
        .filter(|(rel, _)| formats::kind(rel).is_some())
        .collect();
    let ignored = opened
        .files
        .iter()
        .filter(|(rel, _)| formats::kind(rel).is_none())
        .map(|(rel, _)| rel.clone())
        .collect();
    let multi = readable.len() > 1;
    // A directory of `phantom onnx --dump`: files are named by their ONNX values.
    let onnx_names = naming::phantom_dump_names(path);
    let mut tensors: BTreeMap<String, Named> = BTreeMap::new();
    let mut count = 0;
    for (rel, p) in readable {
        let items = formats::list(p)?;
        let alone = items.len() == 1;
        for item in items {
            // A file holding one tensor is named by its path alone, whatever its key.
            let key = if alone { "" } else { item.key.as_str() };
            let name = match onnx_names.get(rel.as_str()) {
                Some(n) => n.clone(),
                None => naming::name_of(rel, key, multi),
            };
            let origin = if item.key.is_empty() {
                rel.clone()
            } else {
                format!("{rel}:{}", item.key)
            };
            // Rules see the name without its shard rank.
            let (rank, name) = naming::shard(&name).unwrap_or((0, name));
            let name = naming::renamed(&name, rules);
            let entry = tensors
                .entry(name.clone())
                .or_insert(Named { parts: vec![] });
            if entry.parts.iter().any(|(r, _, _)| *r == rank) {
                return Err(Error::Usage(format!(
                    "{}: two tensors are both named `{name}` (rank {rank}) after renaming: {origin} and {}; add a --rename rule that keeps them apart",
                    path.display(),
                    entry.parts.iter().find(|(r, _, _)| *r == rank).map(|p| p.1.as_str()).unwrap_or("")
                )));
            }
            entry.parts.push((rank, origin, item));
            count += 1;
        }
    }
    for n in tensors.values_mut() {
        n.parts.sort_by_key(|(r, _, _)| *r);
    }
    Ok(Side {
        tensors,
        report: SideReport {
            path: path.display().to_string(),
            tensors: count,
            ignored_files: ignored,
        },
        _opened: opened,
    })
}

/// Reads every part of `n`; joins shards when there are several (to `want`'s shape when known).
fn read(
    n: &Named,
    want: Option<&[usize]>,
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
        (read(a, Some(tb.shape()), tr, "A")?, tb)
    } else {
        let ta = read(a, None, tr, "A")?;
        let want = (b.parts.len() > 1 && a.parts.len() == 1).then(|| ta.shape().to_vec());
        let tb = read(b, want.as_deref(), tr, "B")?;
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
    let tol = opts.tolerance.for_dtype(lower(ta.dtype(), tb.dtype()));
    let a = ta.to_f64_array();
    let c = compare(&a, tb, tol, None);
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

/// One pair, compared.
fn pair(name: &str, a: &Named, b: &Named, opts: &DiffOptions) -> Result<PairReport> {
    let mut tr = vec![];
    let joined = match both(a, b, &mut tr) {
        Ok(t) => Ok(t),
        // Shards that join to no shape are a mismatch of the pair; an unreadable file ends the run.
        Err(Error::Usage(why)) => Err(why),
        Err(e) => return Err(e),
    };
    let mut r = match joined
        .map_err(|why| (tr.clone(), why))
        .and_then(|(ta, tb)| shape_agreed(ta, tb, opts, tr))
    {
        Ok((ta, tb, tr)) => measured(name, &ta, &tb, tr, opts),
        Err((tr, why)) => mismatch(name, tr, why),
    };
    r.a_origin = origins(a);
    r.b_origin = origins(b);
    Ok(r)
}

/// A `--sum X+Y=Z` pair: X + Y of one side against Z of the other (`None` when the names are not there).
fn summed(
    rule: &(String, String, String),
    a: &Side,
    b: &Side,
    opts: &DiffOptions,
) -> Option<PairReport> {
    let (x, y, z) = rule;
    let (parts, whole, sum_on_a) = match (a.tensors.get(x), a.tensors.get(y), b.tensors.get(z)) {
        (Some(p), Some(q), Some(w)) => ((p, q), w, true),
        _ => (
            (b.tensors.get(x)?, b.tensors.get(y)?),
            a.tensors.get(z)?,
            false,
        ),
    };
    let side = if sum_on_a { "A" } else { "B" };
    let mut tr = vec![];
    let result = (|| -> Result<(Tensor, Tensor)> {
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
    })();
    tr.insert(
        0,
        format!("{side}: {x} + {y} compared with the other side's {z} (--sum)"),
    );
    let mut r = match result.map_err(|e| (tr.clone(), e.to_string())) {
        Ok((ta, tb)) => match shape_agreed(ta, tb, opts, tr) {
            Ok((ta, tb, tr)) => measured(z, &ta, &tb, tr, opts),
            Err((tr, why)) => mismatch(z, tr, why),
        },
        Err((tr, why)) => mismatch(z, tr, why),
    };
    let (ao, bo) = if sum_on_a {
        (
            [origins(parts.0), origins(parts.1)].concat(),
            origins(whole),
        )
    } else {
        (
            origins(whole),
            [origins(parts.0), origins(parts.1)].concat(),
        )
    };
    r.a_origin = ao;
    r.b_origin = bo;
    Some(r)
}

fn mismatch(name: &str, tr: Vec<String>, why: String) -> PairReport {
    let mut r = blank(name, tr);
    r.status = PairStatus::Mismatch;
    r.reason = Some(why);
    r
}

/// Runs the diff.
pub fn run(opts: &DiffOptions, command: Vec<String>) -> Result<DiffReport> {
    let a = side(
        &opts.a,
        &[opts.rename.clone(), opts.rename_a.clone()].concat(),
        opts.limits,
    )?;
    let b = side(
        &opts.b,
        &[opts.rename.clone(), opts.rename_b.clone()].concat(),
        opts.limits,
    )?;
    let mut names: Vec<String> = a
        .tensors
        .keys()
        .filter(|n| b.tensors.contains_key(*n))
        .cloned()
        .collect();
    let sum_names: Vec<&str> = opts.sums.iter().map(|(_, _, z)| z.as_str()).collect();
    names.retain(|n| !sum_names.contains(&n.as_str()));
    names.extend(opts.sums.iter().map(|(_, _, z)| z.clone()));
    let stages = match &opts.order {
        Some(p) => Order::parse(p, &opts.stages)
            .map_err(Error::Usage)?
            .sort(&mut names),
        None => {
            names.sort_by(|x, y| naming::natural(x, y));
            vec![]
        }
    };
    let mut pairs = vec![];
    let mut used_by_sums: Vec<&str> = vec![];
    for name in &names {
        if let Some(rule) = opts.sums.iter().find(|(_, _, z)| z == name) {
            match summed(rule, &a, &b, opts) {
                Some(p) => pairs.push(p),
                None => return Err(Error::Usage(format!("--sum {}+{}={}: the names are not on the sides (X and Y on one side, Z on the other)", rule.0, rule.1, rule.2))),
            }
            used_by_sums.extend([rule.0.as_str(), rule.1.as_str(), rule.2.as_str()]);
            continue;
        }
        pairs.push(pair(name, &a.tensors[name], &b.tensors[name], opts)?);
    }
    let only = |x: &Side, y: &Side| -> Vec<String> {
        let mut v: Vec<String> = x
            .tensors
            .keys()
            .filter(|n| !y.tensors.contains_key(*n) && !used_by_sums.contains(&n.as_str()))
            .cloned()
            .collect();
        v.sort_by(|p, q| naming::natural(p, q));
        v
    };
    let (only_a, only_b) = (only(&a, &b), only(&b, &a));
    let bad = |p: &&PairReport| p.status != PairStatus::Pass;
    let verdict = DiffVerdict {
        status: if pairs.iter().any(|p| bad(&p)) {
            "drift"
        } else {
            "clean"
        }
        .into(),
        compared: pairs.iter().filter(|p| p.metrics.is_some()).count(),
        failed: pairs
            .iter()
            .filter(|p| p.status == PairStatus::Fail)
            .count(),
        mismatched: pairs
            .iter()
            .filter(|p| matches!(p.status, PairStatus::Mismatch))
            .count(),
        first_divergent: pairs.iter().find(bad).map(|p| p.name.clone()),
    };
    Ok(DiffReport {
        schema: "phantom-diff/1".into(),
        phantom_version: env!("CARGO_PKG_VERSION").into(),
        command,
        a: a.report.clone(),
        b: b.report.clone(),
        order: opts.order.clone(),
        stages,
        verdict,
        pairs,
        only_a,
        only_b,
    })
}
