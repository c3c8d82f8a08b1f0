//! ONNX-level rewrites applied to the float64 model before tract parses it, where tract's own expansion of an op
//! would not be a faithful f64 reference:
//! - `Gelu` (exact and tanh): tract expands it with float32 constants; rewritten with f64 constants, so its `Erf`
//!   and `Tanh` run on f64 kernels.
//! - `Swish`: tract ignores its `alpha`; rewritten as `x · sigmoid(alpha · x)`.
//! - `IsNaN`, `IsInf`: tract has no f64 kernel for them and types their output as f64 when their input is, which a
//!   `Where` reading them refuses; rewritten as comparisons (`x ≠ x`, `x = ±∞`), exact in f64.
//! - `Selu`: tract's built-in defaults are truncated; the spec defaults are written out as attributes.
//!
//! Inserted nodes are named `<node name>.rw<k>`, so phantom attributes them to the original ONNX node.

use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};

const DOUBLE: i32 = 11;

struct Builder<'a> {
    node: &'a NodeProto,
    nodes: Vec<NodeProto>,
    consts: Vec<TensorProto>,
}

impl Builder<'_> {
    fn constant(&mut self, v: f64) -> String {
        let name = format!("{}.rw_c{}", self.node.name, self.consts.len());
        self.consts.push(TensorProto {
            name: name.clone(),
            data_type: DOUBLE,
            double_data: vec![v],
            ..Default::default()
        });
        name
    }
    fn op(&mut self, op: &str, inputs: &[&str], out: Option<&str>) -> String {
        let k = self.nodes.len();
        let output = out
            .map(String::from)
            .unwrap_or_else(|| format!("{}__phantom_rw{k}", self.node.output[0]));
        self.nodes.push(NodeProto {
            name: format!("{}.rw{k}", self.node.name),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            ..Default::default()
        });
        output
    }
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

/// The replacement nodes and constants for `n`, or `None` to keep it as it is.
fn replace(n: &NodeProto) -> Option<(Vec<NodeProto>, Vec<TensorProto>)> {
    if !(n.domain.is_empty() || n.domain == "ai.onnx") || n.input.is_empty() || n.output.len() != 1
    {
        return None;
    }
    let mut b = Builder {
        node: n,
        nodes: vec![],
        consts: vec![],
    };
    let x = n.input[0].as_str();
    let y = n.output[0].as_str();
    match n.op_type.as_str() {
        "Gelu" => {
            let tanh = attr(n, "approximate").is_some_and(|a| a.s == b"tanh");
            let (one, half) = (b.constant(1.0), b.constant(0.5));
            let core = if tanh {
                let c = b.constant(0.044715);
                let k = b.constant((2.0 / std::f64::consts::PI).sqrt());
                let x2 = b.op("Mul", &[x, x], None);
                let x3 = b.op("Mul", &[&x2, x], None);
                let cx3 = b.op("Mul", &[&x3, &c], None);
                let inner = b.op("Add", &[x, &cx3], None);
                let scaled = b.op("Mul", &[&inner, &k], None);
                b.op("Tanh", &[&scaled], None)
            } else {
                let k = b.constant(std::f64::consts::FRAC_1_SQRT_2);
                let scaled = b.op("Mul", &[x, &k], None);
                b.op("Erf", &[&scaled], None)
            };
            let plus = b.op("Add", &[&core, &one], None);
            let prod = b.op("Mul", &[x, &plus], None);
            b.op("Mul", &[&prod, &half], Some(y));
        }
        "Swish" => {
            let alpha = attr(n, "alpha").map(|a| a.f as f64).unwrap_or(1.0);
            let a = b.constant(alpha);
            let ax = b.op("Mul", &[x, &a], None);
            let s = b.op("Sigmoid", &[&ax], None);
            b.op("Mul", &[x, &s], Some(y));
        }
        "IsNaN" => {
            let same = b.op("Equal", &[x, x], None);
            b.op("Not", &[&same], Some(y));
        }
        "IsInf" => {
            let flag = |name: &str| attr(n, name).is_none_or(|a| a.i != 0);
            let mut hits = vec![];
            for (on, v) in [
                (flag("detect_positive"), f64::INFINITY),
                (flag("detect_negative"), f64::NEG_INFINITY),
            ] {
                if on {
                    let c = b.constant(v);
                    hits.push(b.op("Equal", &[x, &c], None));
                }
            }
            match hits.as_slice() {
                [one] => b.op("Identity", &[one], Some(y)),
                [p, q] => b.op("Or", &[p, q], Some(y)),
                _ => {
                    let same = b.op("Equal", &[x, x], None);
                    b.op("Xor", &[&same, &same], Some(y))
                }
            };
        }
        _ => return None,
    }
    Some((b.nodes, b.consts))
}

/// Applies the rewrites to `g` and its bodies; returns how many nodes were rewritten.
pub fn rewrite(g: &mut GraphProto) -> usize {
    let mut count = 0;
    let mut out = Vec::with_capacity(g.node.len());
    for mut n in std::mem::take(&mut g.node) {
        for a in n.attribute.iter_mut() {
            for sg in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                count += rewrite(sg);
            }
        }
        if n.op_type == "Selu" {
            for (name, default) in [("alpha", 1.673_263_2_f32), ("gamma", 1.050_701_f32)] {
                if attr(&n, name).is_none() {
                    n.attribute.push(AttributeProto {
                        name: name.into(),
                        r#type: AttributeType::Float as i32,
                        f: default,
                        ..Default::default()
                    });
                }
            }
        }
        match replace(&n) {
            Some((nodes, consts)) => {
                count += 1;
                out.extend(nodes);
                g.initializer.extend(consts);
            }
            None => out.push(n),
        }
    }
    g.node = out;
    count
}
