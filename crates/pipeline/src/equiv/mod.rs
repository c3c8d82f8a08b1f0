//! Two graphs of one model compared as functions: both run in the f64 reference on the same inputs, each value
//! the second computes is paired with the value of the first it equals ([`crate::pairing`]), and the
//! answer is whether their outputs agree to the rounding the second model's weights allow, and if not, the first
//! value where the second stops computing the first's function. `phantom equiv` prints it; `phantom onnx
//! --target-model` pairs the target model's values the same way ([`renamed`]).

mod rename;

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::Result;
use crate::model::{inputs::Inputs, Graph};
use crate::pairing::{self, Divergence, Fate, Pairing, Sketch, Values};
use crate::runner::reference::ReferenceRunner;
use crate::tensor::DType;

pub use rename::renamed;

/// One graph output of the first model and the second model's output at its position.
#[derive(Clone, Debug, Serialize)]
pub struct OutputMatch {
    pub reference: String,
    pub target: String,
    /// The largest difference of the two f64 runs, as a fraction of the value's scale (None: not computed, or the
    /// sizes differ).
    pub distance: Option<f64>,
    pub same: bool,
}

/// The two graphs compared as functions.
#[derive(Debug)]
pub struct Equiv {
    pub pairing: Pairing,
    /// What became of each value the first graph computes.
    pub fates: HashMap<String, Fate>,
    pub outputs: Vec<OutputMatch>,
    /// Where the second graph stops computing the first's function (None when the outputs agree).
    pub divergence: Option<Divergence>,
    /// Values the second graph computes, in graph order.
    pub target_values: Vec<String>,
    /// Where the functions differ: the divergent target value and the reference value its node stands for (the
    /// node of the same name and op, else of the same op reading the same values), of one shape.
    pub counterpart: Option<(String, String)>,
    /// Values of the second graph that bear the name of a value of the first, of its shape, but hold other numbers,
    /// although what their node reads pairs closely: a change inside, whether or not the outputs show it.
    pub inside: Vec<Divergence>,
    /// Target values paired with a reference value of another integer type (an int32 mask for an int64 one): not
    /// renamed, as a node run alone is fed the reference's value in its type.
    pub retyped: std::collections::HashSet<String>,
    /// Target values paired with a reference value of another shape (the same elements in logical order).
    pub reshaped: std::collections::HashSet<String>,
    /// Target values held in ONNX Runtime's NCHWc blocked layout: paired (and compared) in row-major order.
    pub relaid: std::collections::HashSet<String>,
    /// The narrowest float type of the second model's weights, which sets the tolerance.
    pub narrowest: Option<DType>,
    /// Values the reference could not compute in f64, per graph (first, second), with the reason.
    pub missing: [HashMap<String, String>; 2],
}

impl Equiv {
    /// Whether target value `t` has the shape of the reference value it is paired with.
    pub fn same_shape(&self, t: &str) -> bool {
        !self.reshaped.contains(t)
    }

    /// True when every output was computed on both sides and agrees.
    pub fn same(&self) -> bool {
        self.outputs.iter().all(|o| o.same)
    }

    /// True when the outputs agree and nothing changed inside ([`Equiv::inside`]).
    pub fn same_inside(&self) -> bool {
        self.same() && self.inside.is_empty()
    }
}

/// Runs `reference` and `target` in f64 on `inputs` (cast to the types the second declares) and pairs their values.
/// `tol` overrides the tolerance the second model's weights set ([`pairing::tolerance`]).
pub fn compare(
    reference: &Graph,
    target: &Graph,
    inputs: &Inputs,
    tol: Option<f64>,
) -> Result<Equiv> {
    if reference.outputs.len() != target.outputs.len() {
        return Err(crate::error::Error::Input {
            name: target.path.display().to_string(),
            reason: format!(
                "it has {} graph outputs and {} has {}: the outputs are paired by position, so both models must \
                 have as many",
                target.outputs.len(),
                reference.path.display(),
                reference.outputs.len()
            ),
        });
    }
    let none = (&HashSet::new(), &HashSet::new());
    let (ref_values, ref_missing) = sketched(reference, inputs, none, false)?;
    let blocked = crate::model::nchwc::blocked(target);
    let shapes = (ref_values.iter()).map(|(_, s)| s.shape.clone()).collect();
    let target_inputs = inputs_for(target, inputs);
    let (tgt_values, tgt_missing) = sketched(target, &target_inputs, (&blocked, &shapes), true)?;
    let narrowest = narrowest_float(target);
    let p = pairing::pair(
        &ref_values,
        &tgt_values,
        tol.map_or_else(|| pairing::tolerance(narrowest), |t| (t, t / 100.0)),
    );
    let copies = pairing::copies(&ref_values, &p);
    let fates = pairing::fates(reference, target, &p, &copies);
    let outputs = outputs(reference, target, (&ref_values, &tgt_values), p.tol);
    let differing: Vec<String> = outputs
        .iter()
        .filter(|o| !o.same)
        .map(|o| o.target.clone())
        .collect();
    let divergence = pairing::divergence(target, &p, &differing);
    let shapes: HashMap<&str, &[usize]> = (ref_values.iter())
        .map(|(n, s)| (n.as_str(), s.shape.as_slice()))
        .collect();
    let reshaped = (tgt_values.iter())
        .filter(|(t, s)| {
            p.to.get(t)
                .is_some_and(|r| shapes.get(r.as_str()) != Some(&s.shape.as_slice()))
        })
        .map(|(t, _)| t.clone())
        .collect();
    let types: HashMap<&str, DType> = (ref_values.iter())
        .map(|(n, s)| (n.as_str(), s.dtype))
        .collect();
    let retyped = (tgt_values.iter())
        .filter(|(t, s)| {
            let theirs = p.to.get(t).and_then(|r| types.get(r.as_str()));
            theirs.is_some_and(|d| *d != s.dtype && !(d.is_float() && s.dtype.is_float()))
        })
        .map(|(t, _)| t.clone())
        .collect();
    let counterpart = divergence.as_ref().and_then(|d| {
        let r = counterpart(reference, target, &p, d)?;
        let shape = |vs: &Values, n: &str| {
            vs.iter()
                .find(|(m, _)| m == n)
                .map(|(_, s)| s.shape.clone())
        };
        let same = shape(&ref_values, &r).is_some()
            && shape(&ref_values, &r) == shape(&tgt_values, &d.value);
        same.then(|| (d.value.clone(), r))
    });
    // Weights rounded to 16 bits move a value by more than the pairing tolerance where they are tiny (subnormal
    // in float16: a ConvNeXt's layer scale of 1e-6); inside, only a change ten times that counts.
    let wide = matches!(narrowest, Some(DType::F16 | DType::Bf16));
    let bound = p.tol * if wide { 10.0 } else { 1.0 };
    let inside = changed_inside(target, &p, (&ref_values, &tgt_values), bound);
    Ok(Equiv {
        relaid: blocked,
        retyped,
        inside,
        counterpart,
        reshaped,
        pairing: p,
        fates,
        outputs,
        divergence,
        target_values: tgt_values.into_iter().map(|(n, _)| n).collect(),
        narrowest,
        missing: [ref_missing, tgt_missing],
    })
}

/// The reference value the divergent target node stands for: the output (at the divergent value's position) of the
/// reference node of the same name and op, else of one of the same op reading the values the target node's inputs
/// are paired with.
fn counterpart(reference: &Graph, target: &Graph, p: &Pairing, d: &Divergence) -> Option<String> {
    let tn = target.nodes.iter().find(|n| n.name == d.node)?;
    let at = tn.outputs.iter().position(|o| o == &d.value)?;
    let reads = |inputs: &[String]| -> Vec<String> {
        let mut v: Vec<String> = (inputs.iter())
            .filter_map(|i| p.reference_of(i).map(String::from))
            .collect();
        v.sort();
        v
    };
    let wanted = reads(&tn.inputs);
    // The reference node's inputs are reference values already: those the target's values pair with.
    let held: std::collections::HashSet<&str> = p.to.values().map(String::as_str).collect();
    let reads_ref = |inputs: &[String]| -> Vec<String> {
        let mut v: Vec<String> = (inputs.iter())
            .filter(|i| held.contains(i.as_str()))
            .cloned()
            .collect();
        v.sort();
        v
    };
    let same_op = reference.nodes.iter().filter(|n| n.op_type == tn.op_type);
    let named = same_op.clone().find(|n| n.name == tn.name);
    let rn = named.or_else(|| {
        let mut reads_same =
            same_op.filter(|n| !wanted.is_empty() && reads_ref(&n.inputs) == wanted);
        reads_same.next()
    })?;
    rn.outputs.get(at).cloned()
}

/// The target values [`Equiv::inside`] lists, in graph order.
fn changed_inside(
    target: &Graph,
    p: &Pairing,
    (rv, tv): (&Values, &Values),
    bound: f64,
) -> Vec<Divergence> {
    let theirs: HashMap<&str, &Sketch> = rv.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let given: std::collections::HashSet<&str> = (target.inputs.iter().map(|i| i.name.as_str()))
        .chain(target.initializers.keys().map(String::as_str))
        .collect();
    let producers = target.producers();
    let read_alike =
        |i: &String| i.is_empty() || given.contains(i.as_str()) || p.close(i).is_some();
    (tv.iter())
        .filter(|(t, s)| {
            let other = theirs.get(t.as_str());
            p.reference_of(t).is_none()
                && other.is_some_and(|r| r.shape == s.shape && !r.agrees(s, bound))
        })
        .filter_map(|(t, _)| {
            let n = &target.nodes[*producers.get(t.as_str())?];
            n.inputs.iter().all(read_alike).then(|| Divergence {
                value: t.clone(),
                node: n.name.clone(),
                op: n.op_type.clone(),
                others: vec![],
            })
        })
        .collect()
}

/// Every value of one f64 run, sketched (graph inputs first; the `blocked` ones in row-major order, and cropped
/// to each channel count of the other graph's `shapes` a block's padding may account for; with `either`, each also
/// read channels-first), and the values it could not compute.
fn sketched(
    graph: &Graph,
    inputs: &Inputs,
    (blocked, shapes): (&HashSet<String>, &HashSet<Vec<usize>>),
    either: bool,
) -> Result<(Values, HashMap<String, String>)> {
    let block = crate::tensor::nchwc_block_size();
    let sketch = |t: &crate::tensor::Tensor| match either {
        true => Sketch::of_either_layout(t),
        false => Sketch::of(t),
    };
    let mut values: Values = inputs
        .tensors
        .iter()
        .filter_map(|(n, t)| Sketch::of(t).map(|s| (n.clone(), s)))
        .collect();
    let mut missing = HashMap::new();
    ReferenceRunner::default().run_streaming(graph, inputs, &mut |name, v| match v {
        Ok(t) => {
            let plain = blocked.contains(name).then(|| t.unblocked(block)).flatten();
            let s = match &plain {
                Some(p) => Sketch::of_padded(p, block, shapes),
                None => sketch(&t),
            };
            if let Some(s) = s {
                values.push((name.to_string(), s));
            }
        }
        Err(why) => {
            missing.insert(name.to_string(), why);
        }
    })?;
    Ok((values, missing))
}

/// `inputs` as the second graph takes them: only those it declares, floats cast to its declared float type (a model
/// converted to fp16 without `keep_io_types`).
pub fn inputs_for(target: &Graph, inputs: &Inputs) -> Inputs {
    let mut out = inputs.clone();
    out.tensors
        .retain(|(n, _)| target.inputs.iter().any(|i| &i.name == n));
    for (n, t) in &mut out.tensors {
        let declared = target.inputs.iter().find(|i| &i.name == n);
        if let Some(d) = declared.and_then(|i| i.dtype) {
            if d != t.dtype() && d.is_float() && t.dtype().is_float() {
                *t = t.cast(d).unwrap_or_else(|| t.clone());
            }
        }
    }
    out
}

/// The narrowest float type among the model's weights.
fn narrowest_float(g: &Graph) -> Option<DType> {
    let rank = |d: DType| match d {
        DType::Bf16 => 0,
        DType::F16 => 1,
        DType::F32 => 2,
        _ => 3,
    };
    g.initializers
        .values()
        .map(|i| i.dtype)
        .filter(|d| d.is_float())
        .min_by_key(|&d| rank(d))
}

/// The graph outputs paired by position, each judged within `tol` of its scale.
fn outputs(
    reference: &Graph,
    target: &Graph,
    (rv, tv): (&Values, &Values),
    tol: f64,
) -> Vec<OutputMatch> {
    let find = |vs: &'_ Values, n: &str| {
        vs.iter()
            .rev()
            .find(|(m, _)| m == n)
            .map(|(_, s)| s.clone())
    };
    reference
        .outputs
        .iter()
        .zip(&target.outputs)
        .map(|(r, t)| {
            let (a, b) = (find(rv, &r.name), find(tv, &t.name));
            let distance = a.as_ref().zip(b.as_ref()).and_then(|(a, b)| a.distance(b));
            let same = a.zip(b).is_some_and(|(a, b)| a.agrees(&b, tol));
            OutputMatch {
                reference: r.name.clone(),
                target: t.name.clone(),
                distance,
                same,
            }
        })
        .collect()
}
