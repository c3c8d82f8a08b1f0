//! `phantom diff A B`: two dumps of per-layer tensors from any framework, paired by name and compared with the
//! metrics and tolerances of `phantom onnx`, streamed pair by pair (only one pair's tensors are in memory at once).

pub mod archive;
mod container;
mod exported;
pub mod formats;
pub mod inspect;
pub mod naming;
mod pairing;
pub mod pickle;
pub mod reconcile;
pub mod render;
pub mod report;
pub mod serve;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::compare::ToleranceSpec;
use crate::error::{Error, Result};
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
    /// The order to report names in, where the side knows its run's order (PyTorch modules paired with an
    /// exported model's values, [`exported`]).
    rank: Option<std::collections::HashMap<String, usize>>,
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
        rank: None,
        report: SideReport {
            path: path.display().to_string(),
            tensors: count,
            ignored_files: ignored,
            naming: None,
        },
        _opened: opened,
    })
}

/// Runs the diff.
pub fn run(opts: &DiffOptions, command: Vec<String>) -> Result<DiffReport> {
    let (a, b) = open_sides(opts)?;
    let (names, stages) = paired_names(opts, &a, &b)?;
    let (pairs, used_by_sums) = compare_pairs(opts, &names, &a, &b)?;
    let (only_a, only_b) = (
        only_on(&a, &b, &used_by_sums),
        only_on(&b, &a, &used_by_sums),
    );
    if pairs.is_empty() {
        return Err(Error::Usage(no_pairs(&only_a, &only_b)));
    }
    let verdict = verdict(&pairs);
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

/// Opens both sides, each renamed by its rules, and renames the sides where short names pair more tensors.
fn open_sides(opts: &DiffOptions) -> Result<(Side, Side)> {
    let mut a = side(
        &opts.a,
        &[opts.rename.clone(), opts.rename_a.clone()].concat(),
        opts.limits,
    )?;
    let mut b = side(
        &opts.b,
        &[opts.rename.clone(), opts.rename_b.clone()].concat(),
        opts.limits,
    )?;
    let ruled = (
        !opts.rename.is_empty() || !opts.rename_a.is_empty(),
        !opts.rename.is_empty() || !opts.rename_b.is_empty(),
    );
    let (na, nb) = container::reconcile(&mut a.tensors, &mut b.tensors, ruled);
    a.report.naming = na;
    b.report.naming = nb;
    if !ruled.0 && !ruled.1 {
        let order = (
            naming::phantom_dump_order(&opts.a),
            naming::phantom_dump_order(&opts.b),
        );
        if let Some((on_b, said)) =
            exported::reconcile(&mut a, &mut b, (&order.0, &order.1), &opts.tolerance)
        {
            let r = if on_b { &mut b.report } else { &mut a.report };
            r.naming = Some(said);
        }
    }
    Ok((a, b))
}

/// The names to compare in the order to compare them: those on both sides and the `--sum` results, sorted by
/// `--order` or naturally; with the stage order `--order` used.
fn paired_names(opts: &DiffOptions, a: &Side, b: &Side) -> Result<(Vec<String>, Vec<String>)> {
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
            if let Some(rank) = a.rank.as_ref().or(b.rank.as_ref()) {
                // The run's order; a module and its last child share a value: the child first.
                let key = |n: &String| {
                    (
                        rank.get(n).copied().unwrap_or(usize::MAX),
                        usize::MAX - n.matches('.').count(),
                    )
                };
                names.sort_by_key(key);
            }
            vec![]
        }
    };
    Ok((names, stages))
}

/// Compares each named pair, or sum against tensor; with the names the `--sum` rules used up.
fn compare_pairs<'o>(
    opts: &'o DiffOptions,
    names: &[String],
    a: &Side,
    b: &Side,
) -> Result<(Vec<PairReport>, Vec<&'o str>)> {
    let mut pairs = vec![];
    let mut used_by_sums: Vec<&str> = vec![];
    for name in names {
        if let Some(rule) = opts.sums.iter().find(|(_, _, z)| z == name) {
            match pairing::summed(rule, a, b, opts)? {
                Some(p) => pairs.push(p),
                None => return Err(Error::Usage(format!("--sum {}+{}={}: the names are not on the sides (X and Y on one side, Z on the other)", rule.0, rule.1, rule.2))),
            }
            used_by_sums.extend([rule.0.as_str(), rule.1.as_str(), rule.2.as_str()]);
            continue;
        }
        pairs.push(pairing::pair(
            name,
            &a.tensors[name],
            &b.tensors[name],
            opts,
        )?);
    }
    Ok((pairs, used_by_sums))
}

/// The names on side `x` only, neither on `y` nor used by a `--sum` rule, in natural order.
fn only_on(x: &Side, y: &Side, used_by_sums: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = x
        .tensors
        .keys()
        .filter(|n| !y.tensors.contains_key(*n) && !used_by_sums.contains(&n.as_str()))
        .cloned()
        .collect();
    v.sort_by(|p, q| naming::natural(p, q));
    v
}

/// Drift when any pair fails or mismatches, else clean; with the counts and the first pair that does not pass.
fn verdict(pairs: &[PairReport]) -> DiffVerdict {
    let bad = |p: &&PairReport| p.status != PairStatus::Pass;
    DiffVerdict {
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
    }
}

/// Nothing paired is never a clean comparison: the error names each side's first names and the flags that rename.
fn no_pairs(only_a: &[String], only_b: &[String]) -> String {
    let first = |v: &[String]| match v.len() {
        0 => "no tensors".to_string(),
        n => format!(
            "{n} tensors ({}{})",
            v.iter()
                .take(3)
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if n > 3 { ", …" } else { "" }
        ),
    };
    format!(
        "no tensor name is on both sides, so nothing was compared: A has {}, B has {}.\n  hint: --rename \
         'REGEX=REPLACEMENT' (both sides), --rename-a or --rename-b rewrite names until they pair (`$1` for groups); \
         --sum X+Y=Z pairs a sum with one tensor",
        first(only_a),
        first(only_b)
    )
}
