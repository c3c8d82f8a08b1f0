//! `phantom equiv A B`: do two graphs of one model compute the same function? Both run in the f64 reference on the
//! same inputs; B's values are paired with A's by what they compute ([`crate::equiv`]). Exit 0: the outputs agree
//! within the tolerance B's weights allow; exit 1: they do not, and the first value of B that stops computing A's
//! function is named.

use std::collections::BTreeMap;

use serde::Serialize;

use super::args::EquivArgs;
use super::out::sayln;
use super::Outcome;
use crate::equiv::{self, Equiv, OutputMatch};
use crate::pairing::Fate;

/// `phantom equiv`'s JSON (`phantom-equiv/1`).
#[derive(Serialize)]
struct Answer<'a> {
    schema: &'static str,
    reference: String,
    transformed: String,
    same_function: bool,
    /// Values of TRANSFORMED named as MODEL's that hold other numbers, although what they read pairs.
    changed_inside: &'a [crate::pairing::Divergence],
    tolerance: f64,
    outputs: &'a [OutputMatch],
    divergence: Option<&'a crate::pairing::Divergence>,
    /// Values of the transformed model → the reference value each equals.
    paired: BTreeMap<&'a str, &'a str>,
    /// Reference values computed inside a fused node of the transformed model → that node.
    fused: BTreeMap<&'a str, &'a str>,
    /// Values of the transformed model held channels-last (NHWC) where the model holds them channels-first.
    channels_last: std::collections::BTreeSet<&'a str>,
    counts: Counts,
}

#[derive(Serialize)]
struct Counts {
    transformed_values: usize,
    paired: usize,
    duplicates: usize,
    own: usize,
    reference_values: usize,
    held: usize,
    copies: usize,
    fused: usize,
    lost: usize,
}

pub fn run(a: EquivArgs) -> anyhow::Result<Outcome> {
    let spec = super::settings::input_spec(&a.inputs)?;
    let runtime = crate::pipeline::RuntimeSpec::default();
    let (reference, inputs) =
        crate::pipeline::prepared_model("equiv", &a.model, &spec, &runtime, true)?;
    let raw = crate::model::load(&a.transformed)?;
    let own_inputs = equiv::inputs_for(&raw, &inputs);
    let target = crate::pipeline::prepared_graph(raw, &own_inputs, spec.seed, false)?;
    let e = equiv::compare(&reference, &target, &inputs, a.tolerance)?;
    unchecked(&e)?;
    if let Some(dir) = &a.model_explorer {
        overlays(dir, a.force, (&a.model, &a.transformed), &e)?;
    }
    let counts = counts(&e);
    if let Some(path) = &a.json.path {
        super::settings::emit_json(path, &answer(&a, &e, counts))?;
        return Ok(outcome(&e));
    }
    print(&a, &e, &counts);
    Ok(outcome(&e))
}

/// The pairing's Model Explorer overlays, one over each model as its file is.
fn overlays(
    dir: &std::path::Path,
    force: bool,
    (model, transformed): (&std::path::Path, &std::path::Path),
    e: &Equiv,
) -> anyhow::Result<()> {
    use crate::report::explorer;
    let ids = [
        explorer::ids(&crate::model::load(model)?)?,
        explorer::ids(&crate::model::load(transformed)?)?,
    ];
    let (m, t) = (
        super::equiv_overlays::model(e),
        super::equiv_overlays::transformed(e),
    );
    explorer::write_each(dir, force, &[(&ids[0], &m), (&ids[1], &t)])?;
    Ok(())
}

fn outcome(e: &Equiv) -> Outcome {
    match e.same_inside() {
        true => Outcome::Clean,
        false => Outcome::Diverged,
    }
}

/// An output the reference could not compute in f64 on either side leaves the question open: exit 2 with why.
fn unchecked(e: &Equiv) -> anyhow::Result<()> {
    for o in e.outputs.iter().filter(|o| o.distance.is_none()) {
        let why = e.missing[0]
            .get(&o.reference)
            .or_else(|| e.missing[1].get(&o.target));
        if let Some(why) = why {
            anyhow::bail!(
                "output `{}` could not be computed in f64, so whether the two models agree is not known: {why}",
                o.reference
            );
        }
    }
    Ok(())
}

fn counts(e: &Equiv) -> Counts {
    let of = |f: fn(&Fate) -> bool| e.fates.values().filter(|x| f(x)).count();
    let paired = e.pairing.to.len();
    let duplicates = e.pairing.duplicates.len();
    Counts {
        transformed_values: e.target_values.len(),
        paired,
        duplicates,
        own: e.target_values.len().saturating_sub(paired + duplicates),
        reference_values: e.fates.len(),
        held: of(|f| matches!(f, Fate::Paired(_))),
        copies: of(|f| matches!(f, Fate::Copy(_))),
        fused: of(|f| matches!(f, Fate::Fused { .. })),
        lost: of(|f| matches!(f, Fate::Lost)),
    }
}

fn answer<'a>(a: &EquivArgs, e: &'a Equiv, counts: Counts) -> Answer<'a> {
    Answer {
        schema: "phantom-equiv/1",
        reference: a.model.display().to_string(),
        transformed: a.transformed.display().to_string(),
        same_function: e.same_inside(),
        changed_inside: &e.inside,
        tolerance: e.pairing.tol,
        outputs: &e.outputs,
        divergence: e.divergence.as_ref(),
        paired: e
            .pairing
            .to
            .iter()
            .map(|(t, r)| (t.as_str(), r.as_str()))
            .collect(),
        fused: e
            .fates
            .iter()
            .filter_map(|(r, f)| match f {
                Fate::Fused { node, .. } => Some((r.as_str(), node.as_str())),
                _ => None,
            })
            .collect(),
        channels_last: e.pairing.transposed.iter().map(String::as_str).collect(),
        counts,
    }
}

fn print(a: &EquivArgs, e: &Equiv, c: &Counts) {
    sayln!(
        "equiv: {} → {} (both in f64: tract {} with phantom's kernels)",
        a.model.display(),
        a.transformed.display(),
        crate::runner::reference::TRACT_VERSION
    );
    sayln!(
        "  the transformed model computes {} values: {} paired with the model's, {} duplicates of paired ones, {} of \
         its own",
        c.transformed_values,
        c.paired,
        c.duplicates,
        c.own
    );
    sayln!(
        "  the model's {} values: {} held by the transformed model, {} copies of held values, {} inside its fused \
         nodes{}, {} lost",
        c.reference_values,
        c.held,
        c.copies,
        c.fused,
        fused_ops(e),
        c.lost
    );
    if !e.pairing.transposed.is_empty() {
        sayln!(
            "  {} of the transformed model's values are held channels-last (NHWC): paired read channels-first",
            e.pairing.transposed.len()
        );
    }
    for o in &e.outputs {
        let d = o
            .distance
            .map_or("not comparable".into(), |d| format!("{d:.2e} of its scale"));
        let mark = if o.same { "✓" } else { "✗" };
        sayln!("  output {} ↔ {}: {d} {mark}", o.reference, o.target);
    }
    listed(a.list, e);
    let within = format!(
        "within {:.0e} of each value's scale{}",
        e.pairing.tol,
        e.narrowest
            .map(|d| format!(" (the transformed model's weights are {})", d.name()))
            .unwrap_or_default()
    );
    match (&e.divergence, e.same()) {
        (_, true) if e.inside.is_empty() => sayln!("✓ SAME FUNCTION {within}"),
        (_, true) => {
            let first = &e.inside[0];
            sayln!(
                "✗ CHANGED INSIDE: the outputs agree {within} on these inputs, but the transformed model's `{}` ({} \
                 node `{}`) holds other values than the model's `{}`, although what it reads pairs",
                first.value,
                first.op,
                first.node,
                first.value
            );
            if e.inside.len() > 1 {
                let rest: Vec<&str> = e.inside[1..].iter().map(|d| d.value.as_str()).collect();
                sayln!("  changed too: {}", rest.join(", "));
            }
        }
        (Some(d), false) => {
            sayln!(
                "✗ DIFFERENT FUNCTIONS {within}: the transformed model's `{}` ({} node `{}`) equals no value of the \
                 model, although the values it is computed from do",
                d.value,
                d.op,
                d.node
            );
            if !d.others.is_empty() {
                sayln!("  diverging too: {}", d.others.join(", "));
            }
        }
        (None, false) => sayln!("✗ DIFFERENT FUNCTIONS {within}: the outputs differ"),
    }
}

/// ` (Attention 24, SkipLayerNormalization 12)`: the fused nodes' ops, most common first.
fn fused_ops(e: &Equiv) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for f in e.fates.values() {
        if let Fate::Fused { op, .. } = f {
            *by.entry(op.as_str()).or_default() += 1;
        }
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    match v.is_empty() {
        true => String::new(),
        false => {
            let parts: Vec<String> = v.iter().take(5).map(|(o, n)| format!("{o} {n}")).collect();
            format!(" ({})", parts.join(", "))
        }
    }
}

/// The first `n` pairs, in the transformed model's order.
fn listed(n: usize, e: &Equiv) {
    for t in e.target_values.iter().take(n) {
        match e.pairing.reference_of(t) {
            Some(r) => sayln!("    {t} = {r}"),
            None => sayln!("    {t} (its own)"),
        }
    }
}
