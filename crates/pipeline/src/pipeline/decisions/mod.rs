//! The target's discrete decisions, handed to the reference runs (expected noise and the stream-compare) so they
//! adopt those within the noise of their boundaries ([`crate::runner::reference::decide`]), and what was adopted,
//! put on the value reports and summed up in a note.

use std::collections::HashMap;
use std::sync::Arc;

use super::degrade::Said;
use super::{CompareSettings, Lane, Prepared, Reports};
use crate::model::{Graph, Node};
use crate::runner::reference::decide::{self, Adopted, Decision, Decisions, Kept, Measured};
use crate::runner::reference::{qop, select, thresholds};
use crate::spill::Values;
use crate::tensor::{DType, Tensor};

mod fetch;
use fetch::fetch;
pub use fetch::stand_in_values;

/// The least noise a decision's input is taken to carry, in units in the last place of the target's type (relative
/// to the larger of the element and the tensor's RMS): a few roundings, not the comparison's tolerance, which is far
/// looser than the gap between two roundings. Where the expected-noise run measures more on the input (a deep or
/// cancelling computation), the window widens to that ([`Measured`]).
pub(super) const NOISE_ULPS: f64 = 64.0;

/// The one target's decisions: with their fixed windows (for the expected-noise run) and widened to the noise that
/// run measures on their inputs (for the reference runs), and where that noise is recorded.
pub struct Gathered {
    pub fixed: Arc<Decisions>,
    pub measured: Arc<Decisions>,
    pub noise: Arc<Measured>,
}

/// The target's discrete decisions one lane's reference runs adopt.
#[derive(Default)]
pub struct Adoption {
    /// The decisions, adopted within the noise of their boundaries: the noise measured on their inputs
    /// ([`Adoption::measured`]) where it is larger than their fixed window.
    pub decisions: Option<Arc<Decisions>>,
    /// The same decisions with their fixed windows, for the expected-noise run (it measures that noise).
    pub fixed: Option<Arc<Decisions>>,
    /// The expected noise measured on the decisions' inputs, recorded as the comparison judges them.
    pub measured: Option<Arc<Measured>>,
    /// Decision values adopted within a window the measured noise widened ([`widened`]).
    pub widened: Vec<String>,
}

impl Adoption {
    /// A lane's adoption of the decisions `g` gathered.
    pub fn of(g: &Gathered) -> Adoption {
        Adoption {
            decisions: Some(g.measured.clone()),
            fixed: Some(g.fixed.clone()),
            measured: Some(g.noise.clone()),
            widened: vec![],
        }
    }
}

/// The outputs of `n` that are decisions: DynamicQuantizeLinear's codes and zero point, a QDQ pair's
/// DequantizeLinear output, the first of the others.
fn decision_outputs<'g>(graph: &Graph, producers: &Producers, n: &'g Node) -> Vec<&'g String> {
    match n.op_type.as_str() {
        "DequantizeLinear" if decide::paired_quantize(graph, producers, n).is_none() => vec![],
        "DynamicQuantizeLinear" => n.outputs.iter().step_by(2).take(2).collect(),
        // An integer Resize's output, where it interpolates (the reference says, see its `resize_int`).
        "Resize" if n.domain.is_empty() => n.outputs.iter().take(1).collect(),
        op if decide::OPS.contains(&op) => n.outputs.iter().take(1).collect(),
        op if qop::OPS.contains(&op) => n.outputs.iter().take(1).collect(),
        op if thresholds::OPS.contains(&op) && n.domain == "ai.onnx.ml" => {
            n.outputs.iter().take(1).collect()
        }
        // A NonMaxSuppression's selection, which a stand-in reconciles with its own (see phantom-reference's
        // `nms_settle`).
        "NonMaxSuppression" if n.domain.is_empty() => n.outputs.iter().take(1).collect(),
        op if select::OPS.contains(&op) && n.domain.is_empty() => n
            .outputs
            .get(select::decided_output(op))
            .into_iter()
            .collect(),
        _ => vec![],
    }
}

/// The target's value a decision of `n` on its output `name` is read from: the output itself, or for a threshold
/// decision the features the target compared (its first input).
fn held<'a>(n: &'a Node, name: &'a str) -> &'a str {
    match thresholds::OPS.contains(&n.op_type.as_str()) {
        true => n.inputs.first().map_or(name, String::as_str),
        false => name,
    }
}

/// The float a decision of `n` is taken on: its first input, or for a QDQ pair the QuantizeLinear's.
fn decided_input<'g>(graph: &'g Graph, producers: &Producers, n: &'g Node) -> &'g str {
    let decided = decide::paired_quantize(graph, producers, n).unwrap_or(n);
    decided.inputs.first().map(String::as_str).unwrap_or("")
}

/// An integer element type (not a float, not a boolean, not a string).
fn integer(d: DType) -> bool {
    !(d.is_float() || matches!(d, DType::Bool | DType::String | DType::Other))
}

/// Value name → the index of the node that computes it.
type Producers<'g> = HashMap<&'g str, usize>;

/// Whether the target's value of `n`'s output `name`, of type `t`, can be a decision: a `Cast` to an integer type
/// or onto a narrow float format (held in a float carrier, named in `narrow`); any other op.
fn is_decision(n: &Node, name: &str, t: DType, narrow: &mut Narrow) -> bool {
    n.op_type != "Cast" || !(t.is_float() || t == DType::Bool) || narrow.holds(name)
}

/// Whether `n`'s output `name` may be a decision, from the element types the graph states (an unknown type may):
/// its decided input is a float, and a `Cast` goes to an integer type or a narrow float format. An integer or
/// boolean input holds no rounding to reconcile, and a `Cast` to a float or bool is no decision ([`is_decision`]).
/// A QOperator node's first input is quantized: its decision is on the float it computes.
fn may_decide(
    graph: &Graph,
    producers: &Producers,
    (n, name): (&Node, &str),
    types: &HashMap<String, i32>,
) -> bool {
    if qop::OPS.contains(&n.op_type.as_str()) {
        return true;
    }
    if n.op_type == "Resize" {
        return types
            .get(name)
            .is_none_or(|&c| integer(DType::from_onnx(c)));
    }
    let float = |code: i32| {
        DType::from_onnx(code).is_float()
            || crate::tensor::formats::Format::from_onnx(code).is_some_and(|f| f.is_float())
    };
    let input = types.get(decided_input(graph, producers, n));
    if input.is_some_and(|&c| !float(c)) {
        return false;
    }
    let plain = |code: i32| {
        let d = DType::from_onnx(code);
        d == DType::Bool || matches!(d, DType::F32 | DType::F16 | DType::Bf16 | DType::F64)
    };
    n.op_type != "Cast" || !types.get(name).is_some_and(|&c| plain(c))
}

/// The values the model holds in a narrow float format (float8, float4), inferred once when first asked.
struct Narrow<'g> {
    graph: &'g Graph,
    formats: Option<HashMap<String, crate::tensor::formats::Format>>,
}

impl Narrow<'_> {
    fn holds(&mut self, name: &str) -> bool {
        let graph = self.graph;
        let formats = self
            .formats
            .get_or_insert_with(|| crate::model::types::narrow_floats(graph));
        formats.get(name).is_some_and(|f| f.is_float())
    }
}

/// The values of `graph` whose discrete decisions the reference may adopt from the target (none with
/// `--own-decisions`), before any target value is exposed for them (in bounded mode, cuts of their own).
fn wanted<'g>(
    s: &CompareSettings,
    graph: &'g Graph,
    producers: &HashMap<&'g str, usize>,
) -> Vec<(&'g Node, &'g String)> {
    if s.own_decisions {
        return vec![];
    }
    let mut wanted: Vec<(&Node, &String)> = (graph.nodes.iter())
        .flat_map(|n| {
            decision_outputs(graph, producers, n)
                .into_iter()
                .map(move |o| (n, o))
        })
        .collect();
    if !wanted.is_empty() {
        let types = crate::model::types::element_types(graph);
        wanted.retain(|(n, o)| may_decide(graph, producers, (n, o), &types));
    }
    wanted
}

/// Whether a run of `s` on `graph` may adopt any of the target's decisions ([`gather`]).
pub fn any(s: &CompareSettings, graph: &Graph) -> bool {
    !wanted(s, graph, &graph.producers()).is_empty()
}

/// The one target's decisions (none with several targets: the reference can follow only one). Bounded runs hold
/// no captured values, so the decisions are exposed by the target's first cuts and wait on disk for their nodes
/// (however large: the verdict does not depend on the memory budget).
pub fn gather(s: &CompareSettings, p: &Prepared, lane: Source<'_>) -> (Option<Gathered>, Said) {
    let producers = p.graph.producers();
    let wanted = wanted(s, &p.graph, &producers);
    if wanted.is_empty() {
        return (None, Said::default());
    }
    let Source {
        target,
        out,
        rounding,
    } = lane;
    let fetched = match s.budget().map(|budget| fetch(p, target, &wanted, budget)) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            let note = format!(
                "discrete decisions: the target's could not be exposed on their own ({e}); none adopted"
            );
            return (None, Said::note(note));
        }
    };
    let kept = |held: &str| match (out.values.get(held), &fetched) {
        (Some(t), _) => Some(Kept::Memory(Arc::new(t.clone()))),
        (None, Some(f)) if f.has(held) => Some(Kept::Disk(f.clone(), held.to_string())),
        _ => None,
    };
    let input_type = |input: &str| {
        (out.values.get(input).map(Tensor::dtype))
            .or_else(|| rounding.and_then(|r| r.get(input).copied()))
    };
    let g = build(&p.graph, &producers, wanted, kept, input_type);
    (Some(g), Said::default())
}

/// What [`gather`] reads of the one lane: the target (a bounded run's cuts expose its decisions), its captured run
/// and its rounding.
pub struct Source<'a> {
    pub target: &'a mut dyn crate::targets::Target,
    pub out: &'a crate::runner::RunOutput,
    pub rounding: Option<&'a crate::runner::reference::Rounding>,
}

/// The decisions of one target run that kept every value of `graph` (a segment's boundary pass), as [`gather`]
/// takes them in a whole run.
pub fn from_values(
    s: &CompareSettings,
    graph: &Graph,
    values: &HashMap<String, Tensor>,
) -> Option<Gathered> {
    let producers = graph.producers();
    let wanted = wanted(s, graph, &producers);
    if wanted.is_empty() {
        return None;
    }
    let kept = |held: &str| values.get(held).map(|t| Kept::Memory(Arc::new(t.clone())));
    let input_type = |input: &str| values.get(input).map(Tensor::dtype);
    Some(build(graph, &producers, wanted, kept, input_type))
}

/// The decisions on the `wanted` values whose target value `kept` finds, each with its noise window: fixed, and
/// widened to the noise measured on its input (of the type `input_type` says).
fn build(
    graph: &Graph,
    producers: &Producers,
    wanted: Vec<(&Node, &String)>,
    kept: impl Fn(&str) -> Option<Kept>,
    input_type: impl Fn(&str) -> Option<DType>,
) -> Gathered {
    let inputs = wanted
        .iter()
        .map(|(n, _)| decided_input(graph, producers, n));
    let noise = Arc::new(Measured::on(inputs.map(str::to_string)));
    let (mut fixed, mut measured) = (Decisions::new(), Decisions::new());
    let mut narrow = Narrow {
        graph,
        formats: None,
    };
    for (n, name) in wanted {
        let Some(target) = kept(held(n, name)) else {
            continue;
        };
        let kind = match &target {
            Kept::Memory(t) => t.dtype(),
            Kept::Disk(f, held) => f.dtype(held).unwrap_or(DType::Other),
        };
        if !is_decision(n, name, kind, &mut narrow) {
            continue;
        }
        let input = decided_input(graph, producers, n);
        // An integer Resize's window is the reference's to size, from the input's spread.
        if n.op_type == "Resize" {
            if integer(kind) {
                let d = Decision::new(target, 0.0, 0.0);
                measured.insert(name.clone(), d.clone());
                fixed.insert(name.clone(), d);
            }
            continue;
        }
        let dtype = input_type(input).unwrap_or(DType::F32);
        // A QOperator node rounds a float it computed in float32 (its first input is the quantized one).
        let dtype = match qop::OPS.contains(&n.op_type.as_str()) {
            true => DType::F32,
            false => dtype,
        };
        // A selection among integers is exact: nothing to reconcile.
        let selects = select::OPS.contains(&n.op_type.as_str()) || n.op_type == "NonMaxSuppression";
        if selects && !dtype.is_float() {
            continue;
        }
        // The noise of a value computed in the target's type: NOISE_ULPS of its unit roundoff, relative.
        let rtol = NOISE_ULPS * crate::analysis::anomaly::epsilon(dtype);
        let d = Decision::new(target, 0.0, rtol);
        measured.insert(name.clone(), d.measured_on(input, &noise));
        fixed.insert(name.clone(), d);
    }
    Gathered {
        fixed: Arc::new(fixed),
        measured: Arc::new(measured),
        noise,
    }
}

/// Puts what the reference adopted on the value reports; the note summing it up, when it adopted any.
pub fn record(reports: &mut Reports, adopted: &HashMap<String, Adopted>) -> Option<String> {
    let mut total = Adopted::default();
    let mut named: Vec<(&String, &Adopted)> = adopted.iter().collect();
    let taken = |a: &Adopted| a.flips + a.undefined + a.faithful;
    named.sort_by(|a, b| taken(b.1).cmp(&taken(a.1)).then(a.0.cmp(b.0)));
    for (name, a) in &named {
        if let Some(r) = reports.get_mut(*name) {
            r.adopted = Some((*a).clone());
        }
        total.flips += a.flips;
        total.undefined += a.undefined;
        total.beyond += a.beyond;
        total.within = total.within.max(a.within);
        total.faithful += a.faithful;
    }
    (taken(&total) > 0).then(|| note(&total, &named))
}

/// "discrete decisions: …" for the report.
fn note(total: &Adopted, named: &[(&String, &Adopted)]) -> String {
    let taken = |a: &Adopted| a.flips + a.undefined + a.faithful;
    let values = named.iter().filter(|(_, a)| taken(a) > 0).count();
    let top: Vec<String> = (named.iter().filter(|(_, a)| taken(a) > 0).take(3))
        .map(|(n, a)| format!("`{n}` {}", taken(a)))
        .collect();
    let mut s = format!(
        "discrete decisions: the reference took the target's at {} element(s) of {values} value(s) (most: {})",
        taken(total),
        top.join(", ")
    );
    if total.flips > 0 {
        s.push_str(&format!(
            "; {} flip(s) whose input lay within {} of its noise (64 units in the last place of the target's type, or 8× the expected noise \
             measured on the input where that is more; for an integer Resize, 2/1024 of its input's spread, the error of \
             ONNX Runtime's 10-bit fixed-point weights) of one boundary (a rounding, a tree's \
             threshold, or a tie between the values a selection or comparison chose from), so the two sides computed on from the same decision",
            total.flips,
            fraction(total.within)
        ));
    }
    if total.faithful > 0 {
        s.push_str(&format!(
            "; {} quantized level(s) rounded to the other neighbour of the exact value, less than one quantum from it \
             (a faithful rounding, as integer kernels such as ONNX Runtime's fused QDQ kernels compute)",
            total.faithful
        ));
    }
    if total.undefined > 0 {
        s.push_str(&format!(
            "; {} conversion(s) ONNX leaves undefined (NaN, ±inf or out of the integer range) took the target's \
             value and are not compared as numbers",
            total.undefined
        ));
    }
    if total.beyond > 0 {
        s.push_str(&format!(
            "; {} element(s) differ beyond their input's noise (or their noise spans more than one step) and are compared as they are",
            total.beyond
        ));
    }
    s
}

fn fraction(f: f64) -> &'static str {
    match f {
        f if f <= 1.0 / 1024.0 => "1/1024",
        f if f <= 1.0 / 32.0 => "1/32",
        _ => "all",
    }
}

/// The decision values where the reference adopted flips within a window the measured noise widened beyond the
/// fixed one: the expected-noise run keeps the fixed windows, so it may have decided otherwise there.
pub fn widened(lane: &Lane, adopted: &HashMap<String, Adopted>) -> Vec<String> {
    let Some(d) = &lane.adoption.decisions else {
        return vec![];
    };
    let mut out: Vec<String> = (adopted.iter())
        .filter(|(name, a)| a.flips > 0 && d.get(*name).is_some_and(Decision::widened))
        .map(|(name, _)| name.clone())
        .collect();
    out.sort();
    out
}

/// `values`, the other outputs of the nodes computing them, and every value computed from those.
fn downstream(graph: &Graph, values: &[String]) -> std::collections::BTreeSet<String> {
    let (producers, consumers) = (graph.producers(), graph.consumers());
    let mut todo: Vec<usize> = values
        .iter()
        .filter_map(|v| producers.get(v.as_str()).copied())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(i) = todo.pop() {
        for o in graph.nodes[i].outputs.iter().filter(|o| !o.is_empty()) {
            if seen.insert(o.clone()) {
                todo.extend(consumers.get(o.as_str()).into_iter().flatten().copied());
            }
        }
    }
    seen
}

/// Takes the expected noise off the values computed from decisions the expected-noise run may have taken otherwise
/// (`widened`, [`widened`]): its values there are not the target's precision applied to the same decisions. The
/// note saying so, when there are any.
pub fn without_noise_after(
    graph: &Graph,
    widened: &[String],
    reports: &mut Reports,
) -> Option<String> {
    if widened.is_empty() {
        return None;
    }
    let after = downstream(graph, widened);
    let mut stripped = 0;
    for name in &after {
        if let Some(r) = reports.get_mut(name).filter(|r| r.noise.is_some()) {
            crate::analysis::attribution::without_noise(r);
            stripped += 1;
        }
    }
    let named: Vec<String> = widened.iter().map(|d| format!("`{d}`")).collect();
    Some(format!(
        "expected noise: not measured on {stripped} value(s) computed from {}, where the reference took the target's \
         decisions within the noise measured on their inputs and the correctly rounded run, which keeps the fixed \
         window, may have decided otherwise",
        named.join(", ")
    ))
}

/// The introduced error of the nodes computing widened decisions ([`widened`]) is not measured: run alone on the
/// reference's inputs, the target decides for itself, while the reference's value holds the target's decision in
/// the graph. Returns those nodes marked not measured.
pub fn unmeasured_alone(graph: &Graph, widened: &[String], reports: &mut Reports) -> Said {
    let producers = graph.producers();
    let mut said = Said::default();
    for v in widened {
        let Some(&i) = producers.get(v.as_str()) else {
            continue;
        };
        let node = &graph.nodes[i];
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            if let Some(r) = reports.get_mut(o) {
                r.introduced = None;
            }
        }
        let why = "the reference took the target's decisions in the graph; alone, on the reference's inputs, the \
                   target decides for itself";
        said.node(&node.name, "introduced error", why);
    }
    said
}

#[cfg(test)]
mod tests {
    /// BERT's casts of its integer ids to int32 decide nothing: no target value is exposed for them.
    #[test]
    fn casts_of_integers_are_no_decisions() {
        let path = &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/contrib/bert_opt.onnx");
        let g = crate::model::import::load(path).unwrap();
        let (producers, types) = (g.producers(), crate::model::types::element_types(&g));
        let casts: Vec<_> = (g.nodes.iter()).filter(|n| n.op_type == "Cast").collect();
        assert_eq!(casts.len(), 4);
        for n in casts {
            assert!(
                !super::may_decide(&g, &producers, (n, &n.outputs[0]), &types),
                "{}",
                n.name
            );
        }
    }
}
