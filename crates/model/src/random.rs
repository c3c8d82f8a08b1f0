//! Random ops made deterministic and identical on both sides. ONNX Runtime and the reference cannot draw the same
//! numbers from `RandomNormal(Like)`, `RandomUniform(Like)` or `Bernoulli` (different generators, no shared state),
//! so comparing them would only compare two draws. Before the run, each such node is replaced — for the reference
//! and every target alike — by phantom's seeded *hash noise*: ONNX integer ops hash each element's flat index with a
//! per-node salt (from the node's name, its `seed` attribute and `--seed`) into two 30-bit integers, exact on every
//! runtime; those become uniforms in (0, 1) (floored at 2⁻¹⁴ so fp16 can hold them; a normal's tails are cut at
//! 4.4σ), and a normal draw is made from them by Box–Muller (`mean + scale·√(−2 ln u₁)·cos 2πu₂`). The float part is
//! computed by each side in its own precision, so the differences left are rounding, which is what phantom
//! measures. The report notes each replacement. Models below opset 11 (no `Range`) keep their random ops.
//!
//! A `Dropout` in training mode (a model exported without `model.eval()`: `training_mode` a constant true, a
//! non-zero `ratio`) is random too: ONNX Runtime drops other elements on every run and the reference has no
//! generator of its own. From opset 15 it is replaced alike, by a mask of the hash noise (`u ≥ ratio`) and the
//! `1 / (1 − ratio)` scale ONNX defines, and the note says how to export the inference graph instead.

use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};

use super::proto::{int_attr, scalar_i64};
use super::Graph;
use crate::error::Result;

const RANDOM: &[&str] = &[
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Bernoulli",
];

/// The hash's modulus, a prime below 2³¹ (squares stay within int64).
const PRIME: i64 = 2_147_483_647;

/// The graph with its top-level random ops replaced by hash noise seeded with `seed` (the same graph when it has
/// none). `given` are the run's graph inputs, where known: a Dropout whose `training_mode` (and `ratio`) the run
/// gives as inputs is in training mode as much as one whose are constants.
pub fn seeded(graph: Graph, seed: u64, given: Option<&super::inputs::Inputs>) -> Result<Graph> {
    if !graph
        .nodes
        .iter()
        .any(|n| RANDOM.contains(&n.op_type.as_str()) || may_train(n))
    {
        return Ok(graph);
    }
    let Ok(mut proto) = crate::import::decoded(&graph) else {
        return Ok(graph);
    };
    let opset = super::inline::opset_of(&proto);
    let Some(g) = proto.graph.as_mut() else {
        return Ok(graph);
    };
    let given = given.map_or(&[][..], |i| i.tensors.as_slice());
    let notes = replace(g, opset, seed, given);
    let seeded = !notes.is_empty();
    let mut graph = super::inline::reimported(graph, proto, notes)?;
    if seeded {
        graph.random_seed = Some(seed);
    }
    Ok(graph)
}

/// Replaces every top-level random op of `g` by hash noise seeded with `seed`; returns a note per replacement.
/// `given` are graph inputs' values known for the run.
pub fn replace(
    g: &mut GraphProto,
    opset: i64,
    seed: u64,
    given: &[(String, crate::tensor::Tensor)],
) -> Vec<String> {
    if opset < 11 {
        return vec![];
    }
    let mut notes = vec![];
    let mut at = 0;
    while at < g.node.len() {
        let n = g.node[at].clone();
        let default_domain = n.domain.is_empty() || n.domain == "ai.onnx";
        let dropout = match n.op_type == "Dropout" && default_domain && opset >= 15 {
            true => training_ratio(g, &n, given),
            false => None,
        };
        if !(RANDOM.contains(&n.op_type.as_str()) && default_domain) && dropout.is_none() {
            at += 1;
            continue;
        }
        let mut b = Builder {
            prefix: format!("{}/phantom_random", label(&n)),
            nodes: vec![],
            inits: vec![],
            k: 0,
        };
        let salt = salt(&n, seed);
        let built = match dropout {
            Some(ratio) => b.dropout(&n, salt, ratio),
            None => b.noise(&n, salt, opset),
        };
        if built.is_none() {
            at += 1;
            continue;
        }
        let count = b.nodes.len();
        g.node.splice(at..at + 1, b.nodes);
        g.initializer.extend(b.inits);
        notes.push(match dropout {
            Some(ratio) => format!(
                "Dropout `{}` runs in training mode (ratio {ratio}): replaced on both sides by a mask of phantom's \
                 seeded hash noise (salt {salt}), so both drop the same elements; to compare the inference graph, \
                 export the model after `model.eval()`",
                label(&n)
            ),
            None => format!(
                "{} `{}`: replaced on both sides by phantom's seeded hash noise (salt {salt}), so both draw the same numbers",
                n.op_type,
                label(&n)
            ),
        });
        at += count;
    }
    notes
}

/// A Dropout given a `training_mode` input (the only way it can be in training mode): worth reading the model for.
fn may_train(n: &super::Node) -> bool {
    n.op_type == "Dropout" && n.inputs.get(2).is_some_and(|i| !i.is_empty())
}

/// The `ratio` of a Dropout that runs in training mode: its `training_mode` input a constant (or a given input)
/// true and its ratio (default 0.5) a non-zero constant (or given); `None` otherwise (inference mode is the
/// identity).
fn training_ratio(
    g: &GraphProto,
    n: &NodeProto,
    given: &[(String, crate::tensor::Tensor)],
) -> Option<f32> {
    let constant = |name: &str| -> Option<f64> {
        if let Some((_, v)) = given.iter().find(|(k, _)| k == name) {
            return (v.len() == 1)
                .then(|| v.as_f64().iter().next().copied())
                .flatten();
        }
        let t = (g.initializer.iter().find(|t| t.name == name)).or_else(|| {
            (g.node.iter())
                .find(|c| c.op_type == "Constant" && c.output.first().is_some_and(|o| o == name))
                .and_then(|c| c.attribute.iter().find(|a| a.name == "value"))
                .and_then(|a| a.t.as_ref())
        })?;
        let v = super::proto::tensor_from_proto(t, None).ok()?;
        (v.len() == 1)
            .then(|| v.as_f64().iter().next().copied())
            .flatten()
    };
    let training = n.input.get(2).filter(|i| !i.is_empty())?;
    if constant(training)? == 0.0 {
        return None;
    }
    let ratio = match n.input.get(1).filter(|i| !i.is_empty()) {
        Some(r) => constant(r)?,
        None => 0.5,
    };
    (ratio > 0.0 && ratio < 1.0).then_some(ratio as f32)
}

fn label(n: &NodeProto) -> String {
    match n.name.is_empty() {
        true => n
            .output
            .first()
            .cloned()
            .unwrap_or_else(|| n.op_type.clone()),
        false => n.name.clone(),
    }
}

/// FNV-1a of the node's name and `seed` attribute, mixed with the run's seed, below [`PRIME`].
fn salt(n: &NodeProto, seed: u64) -> i64 {
    let own = n
        .attribute
        .iter()
        .find(|a| a.name == "seed")
        .map(|a| a.f.to_bits())
        .unwrap_or(0);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label(n)
        .bytes()
        .chain(own.to_le_bytes())
        .chain(seed.to_le_bytes())
    {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (h % (PRIME as u64 - 1)) as i64 + 1
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

struct Builder {
    prefix: String,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    k: usize,
}

impl Builder {
    /// A fresh value name.
    fn fresh(&mut self, what: &str) -> String {
        self.k += 1;
        format!("{}/{what}{}", self.prefix, self.k)
    }

    fn op(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.nodes.push(NodeProto {
            name: out.clone(),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    fn int(&mut self, v: i64) -> String {
        let name = self.fresh("i");
        self.inits.push(scalar_i64(&name, v));
        name
    }

    fn float(&mut self, v: f32) -> String {
        let name = self.fresh("f");
        self.inits.push(TensorProto {
            name: name.clone(),
            data_type: 1,
            float_data: vec![v],
            ..Default::default()
        });
        name
    }

    /// Emits the replacement of random node `n`; its last node takes `n`'s name and output.
    fn noise(&mut self, n: &NodeProto, salt: i64, opset: i64) -> Option<()> {
        let out = n.output.first().filter(|o| !o.is_empty())?.clone();
        let like = n.op_type.ends_with("Like") || n.op_type == "Bernoulli";
        let shape = match like {
            true => self.op("Shape", &[n.input.first()?], vec![]),
            false => {
                let dims = attr(n, "shape")?.ints.clone();
                let name = self.fresh("shape");
                let t = TensorProto {
                    name: name.clone(),
                    data_type: 7,
                    dims: vec![dims.len() as i64],
                    int64_data: dims,
                    ..Default::default()
                };
                self.inits.push(t);
                name
            }
        };
        let index = self.index(&shape);
        let u1 = self.uniform(&index, salt);
        let f = |n: &NodeProto, k: &str, d: f32| attr(n, k).map_or(d, |a| a.f);
        let value = match n.op_type.as_str() {
            "RandomNormal" | "RandomNormalLike" => {
                let u2 = self.uniform(&index, (salt * 7 + 13) % PRIME);
                let z = self.box_muller(&u1, &u2);
                self.affine(&z, f(n, "scale", 1.0), f(n, "mean", 0.0))
            }
            "Bernoulli" => self.op("Less", &[&u1, n.input.first()?], vec![]),
            _ => {
                let (lo, hi) = (f(n, "low", 0.0), f(n, "high", 1.0));
                self.affine(&u1, hi - lo, lo)
            }
        };
        let cast = match attr(n, "dtype") {
            Some(d) => ("Cast", vec![value], vec![int_attr("to", d.i)]),
            None if like && opset >= 15 => ("CastLike", vec![value, n.input[0].clone()], vec![]),
            None => ("Cast", vec![value], vec![int_attr("to", 1)]),
        };
        self.nodes.push(NodeProto {
            name: label(n),
            op_type: cast.0.into(),
            input: cast.1,
            output: vec![out],
            attribute: cast.2,
            ..Default::default()
        });
        Some(())
    }

    /// A training-mode Dropout of `ratio`: elements whose hash is below `ratio` of its range dropped, the others scaled by
    /// `1 / (1 − ratio)`; the optional mask output is the kept elements.
    fn dropout(&mut self, n: &NodeProto, salt: i64, ratio: f32) -> Option<()> {
        let x = n.input.first().filter(|i| !i.is_empty())?.clone();
        let out = n.output.first().filter(|o| !o.is_empty())?.clone();
        let shape = self.op("Shape", &[&x], vec![]);
        let index = self.index(&shape);
        // Kept where the integer hash reaches ratio·2³⁰: an integer comparison, exact on every runtime and in every
        // precision (a float uniform against `ratio` flipped elements lying within fp16's rounding of it).
        let hash = self.hash(&index, salt);
        let threshold = self.int((ratio as f64 * (1u64 << 30) as f64).round() as i64);
        let keep = self.op("GreaterOrEqual", &[&hash, &threshold], vec![]);
        let kept = self.op("CastLike", &[&keep, &x], vec![]);
        let scale = self.float(1.0 / (1.0 - ratio));
        let scale = self.op("CastLike", &[&scale, &x], vec![]);
        let y = self.op("Mul", &[&x, &kept], vec![]);
        if let Some(mask) = n.output.get(1).filter(|o| !o.is_empty()) {
            self.nodes.push(NodeProto {
                name: format!("{}/mask", self.prefix),
                op_type: "Identity".into(),
                input: vec![keep],
                output: vec![mask.clone()],
                ..Default::default()
            });
        }
        self.nodes.push(NodeProto {
            name: label(n),
            op_type: "Mul".into(),
            input: vec![y, scale],
            output: vec![out],
            ..Default::default()
        });
        Some(())
    }

    /// Each element's flat index plus one, in `shape` (ones cumulated along the flattened tensor, then put back in
    /// shape: no `Range`, whose length tract cannot relate to a shape computed from the data).
    fn index(&mut self, shape: &str) -> String {
        let one = TensorProto {
            data_type: 7,
            dims: vec![1],
            int64_data: vec![1],
            ..Default::default()
        };
        let value = AttributeProto {
            name: "value".into(),
            r#type: AttributeType::Tensor as i32,
            t: Some(one),
            ..Default::default()
        };
        let ones = self.op("ConstantOfShape", &[shape], vec![value]);
        let flat = self.op("Flatten", &[&ones], vec![int_attr("axis", 0)]);
        let axis = self.int(1);
        let count = self.op("CumSum", &[&flat, &axis], vec![]);
        self.op("Reshape", &[&count, shape], vec![])
    }

    /// `(x·a + c) mod p`, then two rounds of `(x² + c) mod p` (nonlinear, so neighbours do not correlate); as a
    /// uniform in (0, 1) of 30 bits built from two 15-bit halves (every constant fits fp16), floored at 2⁻¹⁴.
    fn uniform(&mut self, index: &str, salt: i64) -> String {
        let x = self.hash(index, salt);
        self.uniform_of(&x)
    }

    /// The 30-bit integer hash of each index under `salt` (the integer half of [`Builder::uniform`]).
    fn hash(&mut self, index: &str, salt: i64) -> String {
        let (a, c, p) = (self.int(48_271), self.int(salt), self.int(PRIME));
        let x = self.op("Mul", &[index, &a], vec![]);
        let x = self.op("Add", &[&x, &c], vec![]);
        let mut x = self.op("Mod", &[&x, &p], vec![]);
        for round in [salt ^ 0x5bd1, salt ^ 0x2c1b_3c6d] {
            let c = self.int(round % PRIME);
            let sq = self.op("Mul", &[&x, &x], vec![]);
            let sq = self.op("Add", &[&sq, &c], vec![]);
            x = self.op("Mod", &[&sq, &p], vec![]);
        }
        let mask = self.int(1 << 30);
        self.op("Mod", &[&x, &mask], vec![])
    }

    /// A 30-bit hash as a uniform in (0, 1), floored at 2⁻¹⁴.
    fn uniform_of(&mut self, x: &str) -> String {
        let half = self.int(32_768);
        let hi = self.op("Div", &[x, &half], vec![]);
        let lo = self.op("Mod", &[x, &half], vec![]);
        let (hi, lo) = (
            self.op("Cast", &[&hi], vec![int_attr("to", 1)]),
            self.op("Cast", &[&lo], vec![int_attr("to", 1)]),
        );
        let (h, s, floor) = (
            self.float(0.5),
            self.float(32_768.0),
            self.float(1.0 / 16_384.0),
        );
        let lo = self.op("Add", &[&lo, &h], vec![]);
        let lo = self.op("Div", &[&lo, &s], vec![]);
        let u = self.op("Add", &[&hi, &lo], vec![]);
        let u = self.op("Div", &[&u, &s], vec![]);
        self.op("Max", &[&u, &floor], vec![])
    }

    fn box_muller(&mut self, u1: &str, u2: &str) -> String {
        let (m2, tau) = (self.float(-2.0), self.float(std::f32::consts::TAU));
        let l = self.op("Log", &[u1], vec![]);
        let l = self.op("Mul", &[&l, &m2], vec![]);
        let r = self.op("Sqrt", &[&l], vec![]);
        let a = self.op("Mul", &[u2, &tau], vec![]);
        let c = self.op("Cos", &[&a], vec![]);
        self.op("Mul", &[&r, &c], vec![])
    }

    fn affine(&mut self, x: &str, scale: f32, shift: f32) -> String {
        let (s, b) = (self.float(scale), self.float(shift));
        let y = self.op("Mul", &[x, &s], vec![]);
        self.op("Add", &[&y, &b], vec![])
    }
}
