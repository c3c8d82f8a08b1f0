//! ONNX Runtime's NCHWc ops (`com.microsoft.nchwc`), which its optimizer writes at `ORT_ENABLE_ALL` on CPUs with
//! blocked kernels (a saved optimized model keeps them), expanded before tract parses the float64 model: each
//! becomes the ONNX op it blocks, on phantom's f64 kernels, between layout kernels that only move elements
//! ([`super::contrib`]'s `NchwcBlock`, `NchwcUnblock`, `NchwcConvInput`, `NchwcFilter`). Blocked values keep
//! ONNX Runtime's memory order, so they compare element for element with what ONNX Runtime computes:
//! - `ReorderInput` (`channels_last` read as NHWC) and `ReorderOutput` (`channels`, `channels_last`);
//! - `Conv`: the convolution, `Z` (its fourth input, a fused `Sum`) and `activation` as `FusedConv`
//!   ([`super::fused_conv`]), with the filter and the input read in the order the optimizer reordered them;
//! - `MaxPool`, `AveragePool`, `GlobalMaxPool`, `GlobalAveragePool`: the ONNX pool on the unblocked value;
//! - `Upsample` (integer `scales`, `mode` nearest or linear, `coordinate_transformation_mode`): ONNX `Resize`.
//!
//! The block size is not written in the model: it is MLAS's for the CPU that optimized it, which ONNX Runtime
//! requires to be the CPU that runs it ([`crate::tensor::nchwc_block_size`]).
//! Inserted nodes are named `<node>.rw<k>`, attributed to the original node.

use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto};

pub use crate::model::nchwc::DOMAIN;

struct Expansion<'a> {
    n: &'a NodeProto,
    block: i64,
    nodes: Vec<NodeProto>,
    consts: Vec<TensorProto>,
}

impl Expansion<'_> {
    /// Appends `op` (`domain`) reading `inputs` with `attrs`; its output is `out`, or a fresh name.
    fn op(
        &mut self,
        (op, domain): (&str, &str),
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        out: Option<&str>,
    ) -> String {
        let output = out
            .map(String::from)
            .unwrap_or_else(|| format!("{}__phantom_nchwc{}", self.n.output[0], self.nodes.len()));
        self.nodes.push(NodeProto {
            name: String::new(),
            op_type: op.into(),
            domain: domain.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            attribute: attrs,
            ..Default::default()
        });
        output
    }

    /// A layout kernel of phantom's (`NchwcBlock`, …) with the block size and `extra` integer attributes.
    fn layout(
        &mut self,
        op: &str,
        inputs: &[&str],
        extra: &[(&str, i64)],
        out: Option<&str>,
    ) -> String {
        let mut attrs = vec![int("block", self.block)];
        attrs.extend(extra.iter().map(|(k, v)| int(k, *v)));
        self.op((op, "com.microsoft"), inputs, attrs, out)
    }

    fn transpose(&mut self, x: &str, perm: &[i64], out: Option<&str>) -> String {
        let perm = AttributeProto {
            name: "perm".into(),
            r#type: AttributeType::Ints as i32,
            ints: perm.to_vec(),
            ..Default::default()
        };
        self.op(("Transpose", ""), &[x], vec![perm], out)
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

fn attr_int(n: &NodeProto, name: &str, default: i64) -> i64 {
    (n.attribute.iter())
        .find(|a| a.name == name)
        .map_or(default, |a| a.i)
}

fn attr_str(n: &NodeProto, name: &str, default: &str) -> String {
    (n.attribute.iter())
        .find(|a| a.name == name)
        .map_or(default.into(), |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
}

/// The nodes and constants replacing the NCHWc node `n`; None for another node.
pub fn expand(n: &NodeProto) -> Option<(Vec<NodeProto>, Vec<TensorProto>)> {
    if n.domain != DOMAIN || n.input.is_empty() || n.output.len() != 1 {
        return None;
    }
    let mut e = Expansion {
        n,
        block: crate::tensor::nchwc_block_size() as i64,
        nodes: vec![],
        consts: vec![],
    };
    let (x, y) = (n.input[0].as_str(), n.output[0].as_str());
    let last = attr_int(n, "channels_last", 0) != 0;
    match n.op_type.as_str() {
        "ReorderInput" => {
            let plain = match last {
                true => e.transpose(x, &[0, 3, 1, 2], None),
                false => x.to_string(),
            };
            e.layout("NchwcBlock", &[&plain], &[], Some(y));
        }
        "ReorderOutput" => {
            let channels = attr_int(n, "channels", 0);
            let out = (!last).then_some(y);
            let plain = e.layout("NchwcUnblock", &[x], &[("channels", channels)], out);
            if last {
                e.transpose(&plain, &[0, 2, 3, 1], Some(y));
            }
        }
        "Conv" => conv(&mut e)?,
        "MaxPool" | "AveragePool" | "GlobalMaxPool" | "GlobalAveragePool" => {
            let plain = e.layout("NchwcUnblock", &[x], &[], None);
            let attrs = n.attribute.clone();
            let pooled = e.op((&n.op_type, ""), &[&plain], attrs, None);
            e.layout("NchwcBlock", &[&pooled], &[], Some(y));
        }
        "Upsample" => upsample(&mut e)?,
        _ => return None,
    }
    let name = n.name.clone();
    for (k, node) in e.nodes.iter_mut().enumerate() {
        node.name = format!("{name}.rw{k}");
    }
    Some((e.nodes, e.consts))
}

/// An NCHWc `Conv`: its input and filter in plain order, `FusedConv`'s expansion, the result blocked.
fn conv(e: &mut Expansion) -> Option<()> {
    let n = e.n;
    let (x, w) = (n.input[0].as_str(), n.input.get(1)?.as_str());
    let group = ("group", attr_int(n, "group", 1));
    let plain_x = e.layout("NchwcConvInput", &[x, w], &[group], None);
    let plain_w = e.layout("NchwcFilter", &[w], &[group], None);
    let bias = n.input.get(2).cloned().unwrap_or_default();
    let mut inputs = vec![plain_x, plain_w, bias];
    if let Some(sum) = n.input.get(3).filter(|s| !s.is_empty()) {
        inputs.push(e.layout("NchwcUnblock", &[sum], &[], None));
    }
    let plain_y = format!("{}__phantom_nchwc_plain", n.output[0]);
    let fused = NodeProto {
        name: n.name.clone(),
        op_type: "FusedConv".into(),
        domain: "com.microsoft".into(),
        input: inputs,
        output: vec![plain_y.clone()],
        attribute: n.attribute.clone(),
        ..Default::default()
    };
    let (nodes, consts) = super::fused_conv::expand(&fused)?;
    e.nodes.extend(nodes);
    e.consts.extend(consts);
    e.layout("NchwcBlock", &[&plain_y], &[], Some(&n.output[0]));
    Some(())
}

/// An NCHWc `Upsample` by integer `scales`: ONNX `Resize` on the unblocked value, the result blocked.
fn upsample(e: &mut Expansion) -> Option<()> {
    let n = e.n;
    let scales: Vec<f32> = (n.attribute.iter())
        .find(|a| a.name == "scales")
        .map(|a| a.ints.iter().map(|&s| s as f32).collect())?;
    let (mode, transform) = (
        attr_str(n, "mode", "nearest"),
        attr_str(n, "coordinate_transformation_mode", "asymmetric"),
    );
    let name = format!("{}.rw_scales", n.name);
    e.consts.push(TensorProto {
        name: name.clone(),
        dims: vec![scales.len() as i64],
        data_type: 1,
        float_data: scales,
        ..Default::default()
    });
    let plain = e.layout("NchwcUnblock", &[&n.input[0]], &[], None);
    let text = |k: &str, v: &str| AttributeProto {
        name: k.into(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    };
    let mut attrs = vec![
        text("mode", &mode),
        text("coordinate_transformation_mode", &transform),
    ];
    if mode == "nearest" {
        attrs.push(text("nearest_mode", "floor"));
    }
    let resized = e.op(("Resize", ""), &[&plain, "", &name], attrs, None);
    e.layout("NchwcBlock", &[&resized], &[], Some(&n.output[0]));
    Some(())
}
