//! `FusedConv` (com.microsoft), which ONNX Runtime's optimizer writes at its extended level (a Conv, an optional
//! `Z` added, then an activation), expanded before tract parses the float64 model into the ONNX ops it fuses, each
//! on its f64 kernel: `Conv(X, W, B)`, `Add(·, Z)`, then `activation` with `activation_params` as ONNX Runtime's
//! CPU kernel reads them (`Relu`, `Tanh`, `Sigmoid`, `HardSwish`, `LeakyRelu` alpha, `Clip` min and max, `HardSigmoid` alpha
//! and beta). The inserted nodes are named `<node>.rw<k>`, attributed to the original node.

use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto};

const DOUBLE: i32 = 11;

/// The nodes and constants replacing the `FusedConv` `n`; None for another node or an activation ONNX Runtime
/// does not fuse.
pub fn expand(n: &NodeProto) -> Option<(Vec<NodeProto>, Vec<TensorProto>)> {
    if n.op_type != "FusedConv" || n.domain != "com.microsoft" || n.output.len() != 1 {
        return None;
    }
    let activation = n
        .attribute
        .iter()
        .find(|a| a.name == "activation")
        .map(|a| String::from_utf8_lossy(&a.s).into_owned())
        .unwrap_or_default();
    let params: Vec<f64> = (n.attribute.iter())
        .find(|a| a.name == "activation_params")
        .map(|a| a.floats.iter().map(|&f| f as f64).collect())
        .unwrap_or_default();
    let y = n.output[0].clone();
    let mut nodes = vec![];
    let mut consts = vec![];
    let name = |k: usize| format!("{}.rw{k}", n.name);
    let mid = |k: usize| format!("{y}__phantom_rw{k}");
    let mut conv = NodeProto {
        name: name(0),
        op_type: "Conv".into(),
        input: n.input.iter().take(3).cloned().collect(),
        output: vec![mid(0)],
        attribute: (n.attribute.iter())
            .filter(|a| !a.name.starts_with("activation"))
            .cloned()
            .collect(),
        ..Default::default()
    };
    while conv.input.last().is_some_and(|i| i.is_empty()) {
        conv.input.pop();
    }
    let mut x = mid(0);
    nodes.push(conv);
    if let Some(z) = n.input.get(3).filter(|z| !z.is_empty()) {
        nodes.push(plain(name(1), "Add", vec![x, z.clone()], mid(1)));
        x = mid(1);
    }
    let k = nodes.len();
    let last = match activation.as_str() {
        "" => plain(name(k), "Identity", vec![x], y),
        "Relu" | "Tanh" | "Sigmoid" | "HardSwish" => plain(name(k), &activation, vec![x], y),
        "LeakyRelu" => with_floats(
            plain(name(k), "LeakyRelu", vec![x], y),
            &[("alpha", &params, 0.01)],
        ),
        "HardSigmoid" => with_floats(
            plain(name(k), "HardSigmoid", vec![x], y),
            &[
                ("alpha", &params, 0.2),
                ("beta", &params[params.len().min(1)..], 0.5),
            ],
        ),
        "Clip" => {
            let bound = |i: usize, default: f64, consts: &mut Vec<TensorProto>| {
                let c = format!("{}.rw_c{i}", n.name);
                consts.push(TensorProto {
                    name: c.clone(),
                    data_type: DOUBLE,
                    double_data: vec![params.get(i).copied().unwrap_or(default)],
                    ..Default::default()
                });
                c
            };
            let (lo, hi) = (
                bound(0, f64::MIN, &mut consts),
                bound(1, f64::MAX, &mut consts),
            );
            plain(name(k), "Clip", vec![x, lo, hi], y)
        }
        _ => return None,
    };
    nodes.push(last);
    Some((nodes, consts))
}

fn plain(name: String, op: &str, input: Vec<String>, output: String) -> NodeProto {
    NodeProto {
        name,
        op_type: op.into(),
        input,
        output: vec![output],
        ..Default::default()
    }
}

/// `n` with float attributes from the first element of each slice (its default where the slice is empty).
fn with_floats(mut n: NodeProto, attrs: &[(&str, &[f64], f64)]) -> NodeProto {
    for (name, from, default) in attrs {
        n.attribute.push(AttributeProto {
            name: name.to_string(),
            r#type: AttributeType::Float as i32,
            f: from.first().copied().unwrap_or(*default) as f32,
            ..Default::default()
        });
    }
    n
}
