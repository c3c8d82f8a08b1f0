//! Quantized operators in the QOperator format (`quantize_static(..., QuantFormat.QOperator)`: ONNX's `QLinearConv`
//! and `QLinearMatMul`, ORT's `QLinearAdd`, `QLinearMul`, `QLinearSigmoid`, `QLinearLeakyRelu`,
//! `QLinearGlobalAveragePool`, `QLinearConcat`, `QLinearSoftmax`, `QGemm`) rewritten before tract parses the model as what their
//! definitions say they compute: every quantized input dequantized, the float op in f64, the result quantized
//! (`DequantizeLinear` → op → `QuantizeLinear`, all of them phantom's f64 kernels). tract computes some of them in
//! integer arithmetic of its own (per-channel weight scales included) and types none of ORT's. The output's level is
//! then a discrete decision of the final `QuantizeLinear`, adopted from the target's where it lies within the
//! noise of a rounding boundary ([`super::decide`]).
//!
//! ONNX Runtime's NHWC forms (what its `NhwcTransformer` writes at `ORT_ENABLE_ALL`: `QLinearConv` and
//! `QLinearGlobalAveragePool` with `channels_last`, `NhwcMaxPool`) run the same op between two `Transpose`s, the
//! input's rank read from the weight, the kernel shape or the producers ([`ranks`]).
//! Left as they are: a channels-last node whose rank is not known, `QLinearSoftmax` of an opset before 13 (its
//! 2-D coercion), `QGemm` with a float output.
//! Inserted nodes are named `<node name>.q<k>`, so phantom attributes them to the original ONNX node.

use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};

/// The ops rewritten; their first output is a quantization decision.
pub const OPS: &[&str] = &[
    "QLinearConv",
    "QLinearMatMul",
    "QLinearAdd",
    "QLinearMul",
    "QLinearSigmoid",
    "QLinearLeakyRelu",
    "QLinearGlobalAveragePool",
    "QLinearConcat",
    "QLinearSoftmax",
    "QGemm",
];

struct Builder<'a> {
    node: &'a NodeProto,
    nodes: Vec<NodeProto>,
}

impl Builder<'_> {
    fn name(&self) -> String {
        format!("{}.q{}", self.node.name, self.nodes.len())
    }

    fn push(&mut self, op: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let out = format!("{}_f", self.name());
        self.nodes.push(NodeProto {
            name: self.name(),
            op_type: op.into(),
            input: inputs,
            output: vec![out.clone()],
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    /// Input `k` of the node ("" where absent).
    fn at(&self, k: usize) -> String {
        self.node.input.get(k).cloned().unwrap_or_default()
    }

    /// `DequantizeLinear` of inputs (x, scale, zero point) at `k`, per channel along `axis`.
    fn dq(&mut self, k: usize, axis: Option<i64>) -> String {
        let ins = vec![self.at(k), self.at(k + 1), self.at(k + 2)];
        let attrs = axis.map(|a| int("axis", a)).into_iter().collect();
        self.push("DequantizeLinear", ins, attrs)
    }

    /// The float result quantized by (scale, zero point) at `k` into the node's own output.
    fn q(&mut self, y: String, k: usize) {
        let name = self.name();
        self.nodes.push(NodeProto {
            name,
            op_type: "QuantizeLinear".into(),
            input: vec![y, self.at(k), self.at(k + 1)],
            output: vec![self.node.output[0].clone()],
            ..Default::default()
        });
    }

    /// `x` transposed from channels-last to channels-first (`to_first`) or back, for a value of rank `r`.
    fn relaid(&mut self, x: String, r: usize, to_first: bool) -> String {
        let perm: Vec<i64> = match to_first {
            true => [0, r - 1]
                .into_iter()
                .chain(1..r - 1)
                .map(|a| a as i64)
                .collect(),
            false => [0]
                .into_iter()
                .chain(2..r)
                .chain([1])
                .map(|a| a as i64)
                .collect(),
        };
        let perm = AttributeProto {
            name: "perm".into(),
            r#type: AttributeType::Ints as i32,
            ints: perm,
            ..Default::default()
        };
        self.push("Transpose", vec![x], vec![perm])
    }

    /// The node's attributes named `keep`, as they are.
    fn attrs(&self, keep: &[&str]) -> Vec<AttributeProto> {
        (self.node.attribute.iter())
            .filter(|a| keep.contains(&a.name.as_str()))
            .cloned()
            .collect()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

fn attr_i(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

/// The rewritten nodes of `n`, or `None` to leave it; `rank` is its first input's, where known.
fn expand(n: &NodeProto, rank: Option<usize>) -> Option<Vec<NodeProto>> {
    let mut b = Builder {
        node: n,
        nodes: vec![],
    };
    let has = |k: usize| n.input.get(k).is_some_and(|i| !i.is_empty());
    match n.op_type.as_str() {
        "QLinearConv" => {
            let (x, w) = (b.dq(0, None), b.dq(3, Some(0)));
            let mut ins = vec![x, w];
            if has(8) {
                let s = b.push("Mul", vec![b.at(1), b.at(4)], vec![]);
                let bias = b.push("DequantizeLinear", vec![b.at(8), s], vec![int("axis", 0)]);
                ins.push(bias);
            }
            let keep = [
                "auto_pad",
                "dilations",
                "group",
                "kernel_shape",
                "pads",
                "strides",
            ];
            let last = match attr_i(n, "channels_last").unwrap_or(0) != 0 {
                true => Some(rank.filter(|&r| r >= 3)?),
                false => None,
            };
            if let Some(r) = last {
                ins[0] = b.relaid(ins[0].clone(), r, true);
            }
            let mut y = b.push("Conv", ins, b.attrs(&keep));
            if let Some(r) = last {
                y = b.relaid(y, r, false);
            }
            b.q(y, 6);
        }
        "QLinearMatMul" => {
            let (a, w) = (b.dq(0, None), b.dq(3, Some(-1)));
            let y = b.push("MatMul", vec![a, w], vec![]);
            b.q(y, 6);
        }
        "QLinearAdd" | "QLinearMul" => {
            let (a, c) = (b.dq(0, None), b.dq(3, None));
            let y = b.push(&n.op_type["QLinear".len()..], vec![a, c], vec![]);
            b.q(y, 6);
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" => {
            let x = b.dq(0, None);
            let y = b.push(&n.op_type["QLinear".len()..], vec![x], b.attrs(&["alpha"]));
            b.q(y, 3);
        }
        "QLinearGlobalAveragePool" | "NhwcMaxPool" => pool(&mut b, n, rank)?,
        "QLinearSoftmax" if attr_i(n, "opset").unwrap_or(0) >= 13 => {
            let x = b.dq(0, None);
            let y = b.push("Softmax", vec![x], b.attrs(&["axis"]));
            b.q(y, 3);
        }
        "QLinearConcat" if n.input.len() >= 5 && (n.input.len() - 2).is_multiple_of(3) => {
            let parts: Vec<String> = (2..n.input.len())
                .step_by(3)
                .map(|k| b.dq(k, None))
                .collect();
            let y = b.push("Concat", parts, b.attrs(&["axis"]));
            b.q(y, 0);
        }
        "QGemm" if has(7) => {
            let trans_b = attr_i(n, "transB").unwrap_or(0) != 0;
            let (a, w) = (b.dq(0, None), b.dq(3, Some(if trans_b { 0 } else { 1 })));
            let mut ins = vec![a, w];
            if has(6) {
                let s = b.push("Mul", vec![b.at(1), b.at(4)], vec![]);
                ins.push(b.push("DequantizeLinear", vec![b.at(6), s], vec![int("axis", 0)]));
            }
            let y = b.push("Gemm", ins, b.attrs(&["alpha", "transA", "transB"]));
            b.q(y, 7);
        }
        _ => return None,
    }
    (n.output.len() == 1).then_some(b.nodes)
}

/// `QLinearGlobalAveragePool` (channels-first, or channels-last between transposes) and ONNX Runtime's
/// `NhwcMaxPool` (a maximum of levels is a level: no quantization follows, the node's output is the transpose's).
fn pool(b: &mut Builder, n: &NodeProto, rank: Option<usize>) -> Option<()> {
    let last = n.op_type == "NhwcMaxPool" || attr_i(n, "channels_last").unwrap_or(0) != 0;
    let r = match last {
        true => Some(rank.filter(|&r| r >= 3)?),
        false => None,
    };
    if n.op_type == "NhwcMaxPool" {
        let r = r.filter(|_| n.domain == "com.microsoft")?;
        let x = b.relaid(b.at(0), r, true);
        let keep = [
            "auto_pad",
            "ceil_mode",
            "dilations",
            "kernel_shape",
            "pads",
            "strides",
        ];
        let y = b.push("MaxPool", vec![x], b.attrs(&keep));
        b.relaid(y, r, false);
        b.nodes.last_mut()?.output = vec![n.output[0].clone()];
        return Some(());
    }
    let mut x = b.dq(0, None);
    if let Some(r) = r {
        x = b.relaid(x, r, true);
    }
    let mut y = b.push("GlobalAveragePool", vec![x], vec![]);
    if let Some(r) = r {
        y = b.relaid(y, r, false);
    }
    b.q(y, 3);
    Some(())
}

/// Rewrites every QOperator node of `g` (top level) phantom knows as its dequantize → op → quantize form. Returns
/// how many.
pub fn rewrite(g: &mut GraphProto) -> usize {
    let mut count = 0;
    let ranks = ranks(g);
    let mut out = Vec::with_capacity(g.node.len());
    for n in std::mem::take(&mut g.node) {
        let ours = (OPS.contains(&n.op_type.as_str()) || n.op_type == "NhwcMaxPool")
            && matches!(n.domain.as_str(), "" | "ai.onnx" | "com.microsoft");
        let rank = n.input.first().and_then(|x| ranks.get(x.as_str())).copied();
        match ours.then(|| expand(&n, rank)).flatten() {
            Some(nodes) => {
                count += 1;
                out.extend(nodes);
            }
            None => out.push(n),
        }
    }
    g.node = out;
    count
}

/// The rank of each value that a channels-last node may read, where the graph says it: graph inputs and
/// initializers as declared, then in node order a `Transpose`'s perm, a `QLinearConv`'s weight, a pool's kernel
/// shape, and an elementwise or (de)quantizing op's first input.
fn ranks(g: &GraphProto) -> std::collections::HashMap<String, usize> {
    let mut r: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for v in &g.input {
        let shape = v.r#type.as_ref().and_then(|t| match &t.value {
            Some(tract_onnx::pb::type_proto::Value::TensorType(t)) => t.shape.as_ref(),
            _ => None,
        });
        if let Some(s) = shape {
            r.insert(v.name.clone(), s.dim.len());
        }
    }
    for t in &g.initializer {
        r.insert(t.name.clone(), t.dims.len());
    }
    for n in &g.node {
        let of = |k: usize| n.input.get(k).and_then(|i| r.get(i.as_str())).copied();
        let kernel = n.attribute.iter().find(|a| a.name == "kernel_shape");
        let rank = match n.op_type.as_str() {
            "Transpose" => n
                .attribute
                .iter()
                .find(|a| a.name == "perm")
                .map(|a| a.ints.len())
                .or(of(0)),
            "QLinearConv" => of(3),
            "NhwcMaxPool" | "MaxPool" | "AveragePool" => kernel.map(|k| k.ints.len() + 2).or(of(0)),
            "QuantizeLinear"
            | "DequantizeLinear"
            | "QLinearAdd"
            | "QLinearMul"
            | "QLinearSigmoid"
            | "QLinearLeakyRelu"
            | "QLinearGlobalAveragePool"
            | "Relu"
            | "Clip"
            | "Identity" => of(0),
            _ => None,
        };
        if let (Some(rank), Some(o)) = (rank, n.output.first()) {
            r.insert(o.clone(), rank);
        }
    }
    r
}
