//! The scale of each value's operands, so an absolute tolerance never swallows a tensor much smaller than it.
//!
//! `atol` exists because an element near zero carries the absolute rounding error of the operands it was computed
//! from, not one proportional to its own magnitude. So phantom caps `atol` at `rtol × max(RMS of the value, RMS of
//! the node's activation operands)`: a value computed from operands of RMS 1 keeps the full `atol`, but a model
//! whose activations are around 1e-6 is judged relative to 1e-6, not to `1e-4`. Weights (initializers and `Constant`
//! outputs) do not count as operands: their scale says nothing about the activations' magnitude.
//!
//! Ops that only copy elements ([`crate::model::Node::copies_elements`]: Reshape, Transpose, Concat, Slice...)
//! cannot round, so their values carry on the scales their sources were judged with: the operand scale (a Reshape of
//! a Concat keeps the Concat's `atol`, not one capped by its own smaller RMS) and, as the tolerance's floor
//! ([`crate::compare::Tolerance::floor`]), the largest RMS among them (a Concat's element keeps the scale it had in
//! its larger source). Moving an element never makes it fail: before this, fp16 runs named Reshapes, Transposes
//! and Concats as culprits of rounding their producers did.

use std::collections::{HashMap, HashSet};

use crate::model::Graph;
use crate::tensor::{DType, Tensor};

/// RMS of every reference value recorded as the reference streams, and each value's activation operands.
#[derive(Debug, Default)]
pub struct Scales {
    rms: HashMap<String, f64>,
    operands: HashMap<String, Vec<String>>,
    /// Values produced by ops that only copy elements.
    copies: HashSet<String>,
    /// For those values: the scaling they were judged with, carried on to what copies them further.
    carried: HashMap<String, Scaling>,
    /// Values held in a narrow float format ([`crate::model::types::narrow_floats`]).
    narrow: HashMap<String, crate::tensor::formats::Format>,
}

/// How a value's tolerance is scaled beyond its own RMS ([`crate::compare::Tolerance::scaled`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Scaling {
    /// The largest RMS among the activations it was computed from (0 when unknown).
    pub operands: f64,
    /// For a value that only copies elements: the largest scale its sources were judged with (0 otherwise).
    pub floor: f64,
    /// The coarsest float precision its computed operands were judged in ([`source_precision`]); a value finer
    /// than it is judged in it.
    pub source: Option<DType>,
    /// The narrow float format (float8, float4) the value is held in: it is judged on that format's grid
    /// ([`crate::compare::Tolerance::on_grid`]).
    pub grid: Option<crate::tensor::formats::Format>,
    /// The value's own RMS, when it was measured as the value arrived ([`Scales::own`]): the comparison does not
    /// measure it again.
    pub rms: Option<f64>,
}

impl From<f64> for Scaling {
    fn from(operands: f64) -> Scaling {
        Scaling {
            operands,
            ..Default::default()
        }
    }
}

/// Mantissa bits of a float type (`None` for others): what "coarser" means here.
fn mantissa(d: DType) -> Option<u32> {
    match d {
        DType::F64 => Some(52),
        DType::F32 => Some(23),
        DType::F16 => Some(10),
        DType::Bf16 => Some(7),
        _ => None,
    }
}

/// The precision a float value of `dtype` is judged in, computed from operands judged in `source`: the coarser of
/// the two. A widening Cast or a float64 op fed float32 values adds no precision to what it was given.
pub fn judged_dtype(dtype: DType, source: Option<DType>) -> DType {
    match (
        mantissa(dtype),
        source.and_then(|s| mantissa(s).map(|m| (s, m))),
    ) {
        (Some(own), Some((s, m))) if m < own => s,
        _ => dtype,
    }
}

/// The coarsest precision the float `operands` were judged in, from their reports so far (operands not compared,
/// such as graph inputs and weights, are exact and count for nothing).
pub fn source_precision(
    operands: &[String],
    judged: impl Fn(&str) -> Option<DType>,
) -> Option<DType> {
    operands
        .iter()
        .filter_map(|o| judged(o))
        .filter(|d| mantissa(*d).is_some())
        .min_by_key(|d| mantissa(*d))
}

impl Scales {
    /// The operands of every value `graph` computes (its producer's inputs that are not weights).
    pub fn new(graph: &Graph) -> Scales {
        let constants: HashSet<&str> = graph
            .nodes
            .iter()
            .filter(|n| n.op_type == "Constant")
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .collect();
        let mut operands = HashMap::new();
        let mut copies = HashSet::new();
        for n in &graph.nodes {
            let ins: Vec<String> = n
                .inputs
                .iter()
                .filter(|i| !i.is_empty())
                .filter(|i| !graph.initializers.contains_key(*i) && !constants.contains(i.as_str()))
                .cloned()
                .collect();
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                operands.insert(o.clone(), ins.clone());
                if n.copies_elements() {
                    copies.insert(o.clone());
                }
            }
        }
        Scales {
            rms: HashMap::new(),
            operands,
            copies,
            carried: HashMap::new(),
            narrow: crate::model::types::narrow_floats(graph),
        }
    }

    /// Records the RMS of a reference value (float values only; others do not scale a tolerance).
    pub fn record(&mut self, name: &str, t: &Tensor) {
        if t.dtype().is_float() {
            self.set(name, rms(t));
        }
    }

    /// Records a reference value's RMS measured elsewhere (the comparison's scale).
    pub fn set(&mut self, name: &str, rms: f64) {
        if self.copies.contains(name) {
            let carried = self.scaling(name);
            self.carried.insert(name.to_string(), carried);
        }
        self.rms.insert(name.to_string(), rms);
    }

    /// `value`'s activation operands.
    pub fn operand_names(&self, value: &str) -> &[String] {
        self.operands.get(value).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The largest RMS among `value`'s recorded activation operands (0 when it has none), or for a value that only
    /// copies elements, the operand scale its sources were judged with.
    pub fn operands(&self, value: &str) -> f64 {
        self.scaling(value).operands
    }

    /// How `value`'s tolerance is scaled: by its operands' RMS, or for a value that only copies elements, by the
    /// scales its sources were judged with.
    pub fn scaling(&self, value: &str) -> Scaling {
        let copies = self.copies.contains(value);
        let mut s = Scaling::default();
        for i in self.operand_names(value) {
            let rms = self.rms.get(i).copied().unwrap_or(0.0);
            s.operands = s.operands.max(rms);
            if copies {
                let source = self.judged(i);
                s.operands = s.operands.max(source.operands);
                s.floor = s.floor.max(rms.max(source.floor));
            }
        }
        s.grid = self.narrow.get(value).copied();
        s
    }

    /// [`Scales::scaling_from`] with `value`'s own RMS as recorded ([`Scales::record`]).
    pub fn own(&self, value: &str, judged: impl Fn(&str) -> Option<DType>) -> Scaling {
        Scaling {
            rms: self.rms.get(value).copied(),
            ..self.scaling_from(value, judged)
        }
    }

    /// [`Scales::scaling`] with the precision `value`'s computed operands were judged in, as `judged` gives it
    /// for each (a target's reports so far).
    pub fn scaling_from(&self, value: &str, judged: impl Fn(&str) -> Option<DType>) -> Scaling {
        Scaling {
            source: source_precision(self.operand_names(value), judged),
            ..self.scaling(value)
        }
    }

    /// The scaling `value` was judged with, once recorded.
    fn judged(&self, value: &str) -> Scaling {
        match self.carried.get(value) {
            Some(s) => *s,
            None => self
                .operand_names(value)
                .iter()
                .filter_map(|i| self.rms.get(i))
                .fold(0.0, |a: f64, &b| a.max(b))
                .into(),
        }
    }
}

fn rms(t: &Tensor) -> f64 {
    crate::dispatch_tensor!(t, a => {
        let a = a.as_standard_layout();
        match a.as_slice() {
            Some(s) => super::pass::rms(s),
            None => 0.0,
        }
    }, _s => 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, Tolerance};
    use crate::model::Node;
    use crate::tensor::DType;
    use ndarray::{arr1, ArrayD};

    fn node(index: usize, op: &str, inputs: &[&str], output: &str) -> Node {
        Node {
            index,
            source_index: index,
            name: output.to_string(),
            op_type: op.to_string(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.to_string()],
            subgraph_nodes: 0,
        }
    }

    /// x → Relu `a`, x → Mul `b`; Concat(a, b) → `c`; Reshape(c) → `r`; Relu(r) → `d`.
    fn graph() -> Graph {
        Graph {
            path: "t.onnx".into(),
            bytes: Default::default(),
            sha256: String::new(),
            ir_version: 8,
            opsets: vec![],
            producer: String::new(),
            inputs: vec![],
            outputs: vec![],
            nodes: vec![
                node(0, "Relu", &["x"], "a"),
                node(1, "Mul", &["x"], "b"),
                node(2, "Concat", &["a", "b"], "c"),
                node(3, "Reshape", &["c", "shape"], "r"),
                node(4, "Relu", &["r"], "d"),
            ],
            initializers: Default::default(),
            value_info: Default::default(),
            hidden: vec![],
            was_unsorted: false,
            notes: vec![],
            handed_on: vec![],
            decoded: Default::default(),
            random_seed: None,
        }
    }

    fn f64s(v: &[f64]) -> ArrayD<f64> {
        arr1(v).into_dyn()
    }

    fn f16s(v: &[f64]) -> Tensor {
        Tensor::F16(arr1(v).mapv(half::f16::from_f64).into_dyn())
    }

    #[test]
    fn copies_carry_their_sources_scales_on() {
        let mut s = Scales::new(&graph());
        s.set("x", 20.0);
        let (a, b) = ([10.0, 0.0, -10.0, 0.0], [0.1; 4]);
        s.set("a", crate::compare::pass::rms(&a));
        s.set("b", crate::compare::pass::rms(&b));
        // The Concat is judged with its larger source's RMS as floor and its sources' operand scale.
        let c = s.scaling("c");
        assert_eq!(c.operands, 20.0);
        assert!((c.floor - 50f64.sqrt()).abs() < 1e-12, "{c:?}");
        let joined: Vec<f64> = a.iter().chain(&b).copied().collect();
        s.set("c", crate::compare::pass::rms(&joined));
        // A Reshape of it keeps both; a Relu reading the Reshape is arithmetic again.
        assert_eq!(s.scaling("r"), c);
        s.set("r", crate::compare::pass::rms(&joined));
        assert_eq!(s.scaling("d"), Scaling::from(s.rms["r"]));
        assert_eq!(s.operands("d"), s.rms["r"]);
    }

    #[test]
    fn moving_an_element_never_makes_it_fail() {
        // An element of `a` near zero, 0.07 off: within `a`'s fp16 tolerance (0.01 + 0.01·rms 7.07), but not within
        // one scaled by the Concat's own RMS (0.01 + 0.01·5.0), as it was before copies carried their scales.
        let mut s = Scales::new(&graph());
        let (a, b) = ([10.0, 0.0, -10.0, 0.0], [0.1; 4]);
        s.set("a", crate::compare::pass::rms(&a));
        s.set("b", crate::compare::pass::rms(&b));
        let tol = Tolerance::default_for(DType::F16);
        let judge = |r: &[f64], t: &[f64], sc: Scaling| {
            compare(
                &f64s(r),
                &f16s(t),
                tol.with_floor(sc.floor),
                Some(sc.operands),
            )
            .metrics
            .failed
        };
        let moved = [10.0, 0.07, -10.0, 0.0];
        assert_eq!(judge(&a, &moved, s.scaling("a")), 0);
        let joined: Vec<f64> = a.iter().chain(&b).copied().collect();
        let joined_t: Vec<f64> = moved.iter().chain(&b).copied().collect();
        assert_eq!(judge(&joined, &joined_t, s.scaling("c")), 0);
        assert_eq!(judge(&joined, &joined_t, s.scaling("c").operands.into()), 1);
        s.set("c", crate::compare::pass::rms(&joined));
        assert_eq!(judge(&joined, &joined_t, s.scaling("r")), 0);
    }

    #[test]
    fn a_value_is_judged_in_the_coarsest_precision_it_was_computed_from() {
        use DType::*;
        assert_eq!(
            judged_dtype(F64, Some(F32)),
            F32,
            "a widening Cast adds no precision"
        );
        assert_eq!(
            judged_dtype(F32, Some(F64)),
            F32,
            "a narrowing one keeps its own"
        );
        assert_eq!(judged_dtype(F32, Some(Bf16)), Bf16);
        assert_eq!(
            judged_dtype(I64, Some(F16)),
            I64,
            "integers compare exactly"
        );
        assert_eq!(
            judged_dtype(F64, None),
            F64,
            "exact operands (inputs, weights) coarsen nothing"
        );
        let ops = ["a".to_string(), "b".to_string(), "w".to_string()];
        let judged = |o: &str| match o {
            "a" => Some(F32),
            "b" => Some(F16),
            _ => None,
        };
        assert_eq!(source_precision(&ops, judged), Some(F16));
        assert_eq!(source_precision(&ops[2..], judged), None);
    }
}
