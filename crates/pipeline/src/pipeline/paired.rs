//! `--target-model` paired by value: before the target runs, the reference runs the target model in f64 too, and
//! each of its values is renamed to the reference value it equals ([`crate::equiv`]), so the comparison, which pairs
//! values by name, pairs what the two graphs compute (an optimizer's fusions, a simplifier's folds that keep a
//! name). A reference value the target model computes inside a fused node, or only as a copy, is covered by what is
//! compared and says so. Where the two models compute different functions even in f64, a note names the first value
//! that differs: a graph transformation's change, not the runtime's. Where the reference cannot run the target
//! model, or the target model quantizes what the model does not, values pair by name as before, with a note.

use std::collections::{BTreeMap, HashMap};

use crate::equiv;
use crate::model::{inputs::Inputs, Graph};
use crate::pairing::Fate;
use crate::targets::Target;
use crate::tensor::Tensor;

/// What the pairing tells the comparison of one target.
#[derive(Debug, Default)]
pub struct Paired {
    /// Reference values the target model does not compute under their name, with why they are covered.
    pub covered: HashMap<String, String>,
    /// Reference values the target model holds in another shape (the same elements in logical order).
    pub reshaped: std::collections::HashSet<String>,
    /// Reference values the target model holds in ONNX Runtime's NCHWc blocked layout, read in row-major order
    /// before they are compared.
    pub relaid: std::collections::HashSet<String>,
    /// Reference values the target model holds channels-last (NHWC), read channels-first before they are compared.
    pub transposed: std::collections::HashSet<String>,
    pub notes: Vec<String>,
    /// What the report says of the pairing (None: the values paired by name).
    pub report: Option<crate::report::model::Pairing>,
}

impl Paired {
    /// The target's value of reference value `name` in the layout and shape the model holds it in (`shape`): read
    /// in row-major order where ONNX Runtime's NCHWc layout holds it, channels-first where the target model holds
    /// it channels-last, reshaped where it holds it in another shape; None where none of these.
    pub fn as_model_holds(&self, name: &str, t: &Tensor, shape: &[usize]) -> Option<Tensor> {
        let unblocked = match (self.relaid.contains(name), self.transposed.contains(name)) {
            (true, _) => t
                .unblocked(crate::tensor::nchwc_block_size())
                .map(|u| unpadded(u, shape)),
            (false, true) => t.channels_first(),
            (false, false) => None,
        };
        let plain = unblocked.as_ref().unwrap_or(t);
        match self.reshaped.contains(name) {
            true => plain.reshaped(shape).or(unblocked),
            false => unblocked,
        }
    }
}

/// An unblocked NCHWc value `u` without the channels its last block pads, where the model holds it with fewer
/// channels (`shape`); else as it is.
fn unpadded(u: Tensor, shape: &[usize]) -> Tensor {
    let s = u.shape();
    let padded = shape.len() == 4
        && s.len() == 4
        && shape[1] < s[1]
        && (shape[0], &shape[2..]) == (s[0], &s[2..]);
    match padded {
        true => u.channels_cropped(shape[1]).unwrap_or(u),
        false => u,
    }
}

/// Pairs the model `target` runs with `graph` by value and makes it run the renamed model; None when the target
/// runs `graph` itself (or a conversion phantom made, which keeps the names), or `--pair-by-name` says so.
pub fn pair(
    s: &super::CompareSettings,
    target: &mut dyn Target,
    graph: &Graph,
    inputs: &Inputs,
) -> Option<Paired> {
    target.spec().model.as_ref()?;
    if s.pair_by_name {
        return None;
    }
    let own = target.own_model()?.clone();
    crate::watchdog::stage("pairing the target model's values with the reference's in f64");
    let lossy = quantizes(&own, graph);
    if !lossy.is_empty() {
        // Quantization moves every value by far more than pairing by value tolerates: names pair what it cannot.
        return Some(Paired {
            notes: vec![format!(
                "values paired with the target model's by name: it quantizes ({}), so its values differ from the \
                 model's by design",
                lossy.join(", ")
            )],
            ..Default::default()
        });
    }
    let paired = equiv::compare(graph, &own, inputs, None)
        .and_then(|e| equiv::renamed(&own, &e).map(|(g, names)| (e, g, names)))
        .and_then(|(e, g, names)| target.adopt_model(g).map(|()| (e, names)));
    Some(match paired {
        Ok((e, names)) => from(&e, names),
        Err(why) => Paired {
            notes: vec![format!(
                "values paired with the target model's by name: the f64 reference could not run it ({why}); a \
                 value it renamed or fused is unchecked"
            )],
            ..Default::default()
        },
    })
}

/// Ops that quantize, in the target model and not in the reference's: a function changed by design.
fn quantizes(target: &Graph, reference: &Graph) -> Vec<String> {
    const QUANTIZING: &[&str] = &[
        "QuantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "MatMulNBits",
        "DynamicQuantizeMatMul",
        "QGemm",
        "QAttention",
        "QLinearConv",
        "QLinearMatMul",
    ];
    let has = |g: &Graph, op: &str| g.nodes.iter().any(|n| n.op_type == op);
    (QUANTIZING.iter())
        .filter(|op| has(target, op) && !has(reference, op))
        .map(|op| op.to_string())
        .collect()
}

/// The covered values and the notes of a pairing (`names`: the target model's values renamed, to the names they
/// run under).
fn from(e: &equiv::Equiv, names: HashMap<String, String>) -> Paired {
    let mut covered = HashMap::new();
    let mut fused: BTreeMap<&str, usize> = BTreeMap::new();
    for (r, f) in &e.fates {
        let why = match f {
            Fate::Fused { op, .. } => {
                *fused.entry(op).or_default() += 1;
                format!("fused in the target model into a {op} node, whose output is compared")
            }
            Fate::Copy(_) => {
                "equals a compared value in f64 (the target model computes it once)".into()
            }
            Fate::Paired(t) if e.retyped.contains(t) => format!(
                "held by the target model as `{t}`, an integer of another width, equal in f64"
            ),
            _ => continue,
        };
        covered.insert(r.clone(), why);
    }
    let ops: Vec<String> = fused.iter().map(|(o, n)| format!("{o} {n}")).collect();
    let paired = e.pairing.to.len() + e.pairing.duplicates.len();
    let inside = match ops.is_empty() {
        true => String::new(),
        false => format!(
            "; {} of the model's values are computed inside its fused nodes ({})",
            fused.values().sum::<usize>(),
            ops.join(", ")
        ),
    };
    let mut notes = vec![format!(
        "values paired with the target model's by what they compute in f64, not by name: {paired} of its {} \
         values{inside}",
        e.target_values.len(),
    )];
    if !e.same() {
        notes.push(different(e));
    }
    let reshaped = (e.reshaped.iter())
        .filter_map(|t| e.pairing.to.get(t).cloned())
        .collect();
    // Under the names they run under: a blocked value that keeps its own name (the target model gives the paired
    // name to its plain copy) is compared under none of the model's.
    let relaid: std::collections::HashSet<String> = (e.relaid.iter())
        .filter_map(|t| names.get(t).cloned())
        .collect();
    let transposed: std::collections::HashSet<String> = (e.pairing.transposed.iter())
        .filter_map(|t| names.get(t).cloned())
        .collect();
    if !transposed.is_empty() {
        notes.push(format!(
            "{} of the target model's values are held channels-last (NHWC) where the model holds them \
             channels-first: they are compared channels-first",
            transposed.len()
        ));
    }
    if !relaid.is_empty() {
        notes.push(format!(
            "{} of the target model's values are held in ONNX Runtime's NCHWc blocked layout (its optimizer's \
             `com.microsoft.nchwc` ops): they are compared in row-major order",
            relaid.len()
        ));
    }
    let report = crate::report::model::Pairing {
        summary: notes[0].clone(),
        renamed: names.into_iter().collect(),
        fused: (e.fates.iter())
            .filter_map(|(r, f)| match f {
                Fate::Fused { node, .. } => Some((r.clone(), node.clone())),
                _ => None,
            })
            .collect(),
        diverges_at: (!e.same())
            .then(|| e.divergence.as_ref().map(|d| d.value.clone()))
            .flatten(),
    };
    Paired {
        covered,
        reshaped,
        relaid,
        transposed,
        notes,
        report: Some(report),
    }
}

/// The note saying the two models compute different functions, and where that begins.
fn different(e: &equiv::Equiv) -> String {
    let outputs: Vec<String> = (e.outputs.iter().filter(|o| !o.same))
        .map(|o| match o.distance {
            Some(d) => format!("`{}` by {d:.2e} of its scale", o.reference),
            None => format!("`{}`", o.reference),
        })
        .collect();
    let start = match &e.divergence {
        Some(d) => format!(
            ": its `{}` ({} node `{}`) equals no value of the model although the values it is computed from do",
            d.value, d.op, d.node
        ),
        None => String::new(),
    };
    format!(
        "the target model computes a different function from the model's even in f64 (a change made by the graph's \
         transformation, not by the runtime){start}; outputs differing in f64: {}",
        outputs.join(", ")
    )
}
