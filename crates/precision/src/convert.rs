//! phantom's own float32 → float16/bfloat16 model conversion.
//!
//! Every float32 value keeps its name and is stored in the target type, except: the main graph's inputs and
//! outputs keep their types (a `Cast` is put behind each input and in front of each output), nodes kept in float32
//! (by name, by op type, or because the op has no low-precision form in ONNX) read float32 copies of their inputs
//! and their outputs are cast back, and input slots the spec types as float32 (Resize scales) stay float32.
//! `Cast` targets, `Constant`/`ConstantOfShape` values and dtype attributes follow the values, recursively through
//! `If`/`Loop`/`Scan` bodies (whose inputs and outputs take the target type). Initializers beyond the target
//! type's range are converted as the hardware would store them (to ±inf) and reported, never clamped; non-zero
//! values that flush to zero are reported too. Values already in float16 (models with fp16 weights) stay as they
//! are.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;
use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto,
};

use super::casts::{cast_outputs, CastShapes, InputCasts};
use super::integers::integer_arithmetic;
pub use super::range::{range_issues, RangeIssue, RangeKind};
use super::LowPrecision;
use crate::error::Result;
use crate::model::proto::{tensor_from_proto, tensor_to_proto};
use crate::model::types::{declared, infer, set_declared, BFLOAT16, FLOAT, FLOAT16};
use crate::tensor::Tensor;

/// Ops with no float16 form in the ONNX spec or whose float inputs must stay float32: kept whole in float32.
pub const KEEP_OPS: &[&str] = &[
    "Range",
    "NonMaxSuppression",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "TfIdfVectorizer",
];

/// Input slots typed float32 by the spec whatever the data type: (op, slot).
const FP32_SLOTS: &[(&str, usize)] = &[("Resize", 1), ("Resize", 2), ("Upsample", 1)];

/// Ops whose inputs may be of any type: no cast is put in front of them.
pub(super) const ANY_INPUT: &[&str] = &["Cast", "Shape", "Size", "CastLike"];

/// What to convert to and what to keep.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    pub to: LowPrecision,
    /// Node names kept in float32.
    pub keep_nodes: HashSet<String>,
    /// Op types kept in float32 (beyond [`KEEP_OPS`]).
    pub keep_ops: HashSet<String>,
}

/// A node left in float32 and why.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct KeptNode {
    pub node: String,
    pub op_type: String,
    pub why: String,
}

/// The converted model and what the conversion did.
#[derive(Clone, Debug)]
pub struct Conversion {
    pub model: ModelProto,
    pub kept: Vec<KeptNode>,
    pub range_issues: Vec<RangeIssue>,
    pub converted_tensors: usize,
    pub inserted_casts: usize,
}

pub(super) struct Ctx<'a> {
    pub(super) opts: &'a ConvertOptions,
    pub(super) code: i32,
    pub(super) base: Option<&'a Path>,
    pub(super) out: Conversion,
    pub(super) counter: usize,
}

impl LowPrecision {
    pub fn onnx_code(self) -> i32 {
        match self {
            LowPrecision::F16 => FLOAT16,
            LowPrecision::Bf16 => BFLOAT16,
        }
    }
    fn suffix(self) -> &'static str {
        match self {
            LowPrecision::F16 => "fp16",
            LowPrecision::Bf16 => "bf16",
        }
    }
}

/// Converts `model` (whose external data, if any, lies beside `base`) to the target precision.
pub fn convert(
    model: &ModelProto,
    base: Option<&Path>,
    opts: &ConvertOptions,
) -> Result<Conversion> {
    let mut m = model.clone();
    let mut ctx = Ctx {
        opts,
        code: opts.to.onnx_code(),
        base,
        out: Conversion {
            model: ModelProto::default(),
            kept: vec![],
            range_issues: vec![],
            converted_tensors: 0,
            inserted_casts: 0,
        },
        counter: 0,
    };
    if let Some(g) = m.graph.as_mut() {
        convert_graph(g, &mut ctx, true, &HashMap::new(), &HashMap::new())?;
    }
    // Float16 Cast targets and value types need no newer opset; bfloat16 needs opset 13 for most ops.
    ctx.out.model = m;
    Ok(ctx.out)
}

pub(super) fn cast_node(name: String, from: &str, to: &str, code: i32) -> NodeProto {
    NodeProto {
        name,
        op_type: "Cast".into(),
        input: vec![from.into()],
        output: vec![to.into()],
        attribute: vec![AttributeProto {
            name: "to".into(),
            r#type: AttributeType::Int as i32,
            i: code as i64,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn kept_why(n: &NodeProto, opts: &ConvertOptions) -> Option<String> {
    if opts.keep_nodes.contains(&n.name) {
        Some("asked to keep it in float32".into())
    } else if opts.keep_ops.contains(&n.op_type) {
        Some(format!("{} kept in float32", n.op_type))
    } else if n.op_type == "OptionalGetElement" {
        Some(
            "it unwraps an optional value, which keeps its type (a cast cannot read an optional)"
                .into(),
        )
    } else if KEEP_OPS.contains(&n.op_type.as_str()) {
        Some(format!("{} has no reduced-precision form", n.op_type))
    } else {
        None
    }
}

pub(super) fn needs_fp32(n: &NodeProto, slot: usize, kept: bool) -> bool {
    kept || FP32_SLOTS.contains(&(n.op_type.as_str(), slot))
}

fn convert_tensor(t: &mut TensorProto, ctx: &mut Ctx) -> Result<()> {
    if t.data_type != FLOAT {
        return Ok(());
    }
    let host = tensor_from_proto(t, ctx.base)?;
    let Tensor::F32(a) = &host else {
        return Ok(());
    };
    ctx.out.range_issues.extend(range_issues(
        &t.name,
        a.iter().map(|&v| v as f64),
        ctx.opts.to,
    ));
    let low = host.cast(ctx.opts.to.dtype()).expect("float casts");
    let name = t.name.clone();
    *t = tensor_to_proto(&name, &low);
    ctx.out.converted_tensors += 1;
    Ok(())
}

/// Converts the dtype-bearing attributes of a converted node.
fn convert_attributes(n: &mut NodeProto, ctx: &mut Ctx) -> Result<()> {
    let op = n.op_type.clone();
    // Attributes whose float32 default must be written out in the target type.
    let missing = |n: &NodeProto, name: &str| !n.attribute.iter().any(|a| a.name == name);
    if matches!(op.as_str(), "RandomNormal" | "RandomUniform") && missing(n, "dtype") {
        n.attribute.push(AttributeProto {
            name: "dtype".into(),
            r#type: AttributeType::Int as i32,
            i: FLOAT as i64,
            ..Default::default()
        });
    }
    if op == "ConstantOfShape" && missing(n, "value") {
        n.attribute.push(AttributeProto {
            name: "value".into(),
            r#type: AttributeType::Tensor as i32,
            t: Some(tensor_to_proto(
                "",
                &Tensor::F32(ndarray::ArrayD::zeros(vec![1])),
            )),
            ..Default::default()
        });
    }
    for a in n.attribute.iter_mut() {
        let dtype_attr = matches!(
            (op.as_str(), a.name.as_str()),
            ("Cast", "to")
                | (
                    "EyeLike"
                        | "RandomNormal"
                        | "RandomUniform"
                        | "RandomNormalLike"
                        | "RandomUniformLike"
                        | "Bernoulli",
                    "dtype"
                )
        );
        if dtype_attr && a.i as i32 == FLOAT {
            a.i = ctx.code as i64;
        }
        if matches!(op.as_str(), "Constant" | "ConstantOfShape") {
            if let Some(t) = a.t.as_mut() {
                convert_tensor(t, ctx)?;
            }
            if a.name == "value_float" || a.name == "value_floats" {
                let scalar = a.name == "value_float";
                let vals = if scalar { vec![a.f] } else { a.floats.clone() };
                let shape = if scalar { vec![] } else { vec![vals.len()] };
                let mut t = tensor_to_proto(
                    "",
                    &Tensor::F32(ndarray::ArrayD::from_shape_vec(shape, vals).expect("shape")),
                );
                convert_tensor(&mut t, ctx)?;
                *a = AttributeProto {
                    name: "value".into(),
                    r#type: AttributeType::Tensor as i32,
                    t: Some(t),
                    ..Default::default()
                };
            }
        }
    }
    Ok(())
}

/// Converts one graph. `main` keeps the graph's input/output types; bodies take the target type. `outer_types`
/// and `outer_storage` are the original and converted types of values visible from enclosing graphs.
fn convert_graph(
    g: &mut GraphProto,
    ctx: &mut Ctx,
    main: bool,
    outer_types: &HashMap<String, i32>,
    outer_storage: &HashMap<String, i32>,
) -> Result<()> {
    let types = infer(g, outer_types);
    let kept = kept_nodes(g, &types, ctx);
    let mut storage = plan_storage(g, ctx.code, main, &types, &kept, outer_storage);
    let mut shapes = CastShapes::new(g);
    let (tail, renamed) = cast_outputs(g, ctx, main, &types, &mut storage, &mut shapes);

    // Nodes: casts in front of inputs whose stored type is not what the node reads, attributes, bodies.
    let mut casts = InputCasts {
        main,
        existing: g
            .node
            .iter()
            .flat_map(|n| n.output.iter().chain(n.input.iter()).cloned())
            .chain(g.initializer.iter().map(|t| t.name.clone()))
            .collect(),
        made: HashMap::new(),
        types: &types,
        storage: &storage,
        renamed: &renamed,
    };
    let mut nodes = Vec::with_capacity(g.node.len() + tail.len());
    let mut types_here = outer_types.clone();
    types_here.extend(types.iter().map(|(k, v)| (k.clone(), *v)));
    for (mut n, k) in std::mem::take(&mut g.node).into_iter().zip(kept) {
        casts.retype_inputs(&mut n, k.is_some(), ctx, &mut nodes, &mut shapes);
        if k.is_none() {
            convert_node(&mut n, ctx, &types_here, &storage)?;
        }
        nodes.push(n);
    }
    ctx.out.inserted_casts += tail.len();
    nodes.extend(tail);
    g.node = nodes;
    g.value_info.extend(shapes.infos);
    apply_storage(g, ctx, &storage)
}

/// Why each node of `g` stays in float32 (`None`: it is converted); the kept ones are recorded in `ctx.out.kept`.
fn kept_nodes(g: &GraphProto, types: &HashMap<String, i32>, ctx: &mut Ctx) -> Vec<Option<String>> {
    let arith = integer_arithmetic(g, types);
    let kept: Vec<Option<String>> = g
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| {
            kept_why(n, ctx.opts).or_else(|| {
                arith.contains(&i).then(|| {
                    "computes on values cast from integers (shape arithmetic): float16 would round sizes".into()
                })
            })
        })
        .collect();
    for (n, why) in g.node.iter().zip(&kept) {
        if let Some(why) = why {
            ctx.out.kept.push(KeptNode {
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                why: why.clone(),
            });
        }
    }
    constants_for_kept(g, kept)
}

/// `kept` with the `Constant`s that only float32 slots read kept too, as initializers are ([`plan_storage`]):
/// stored in the target type and cast back, the constant itself would change (T5's `log(max_distance /
/// max_exact)` = 2.7725887 became 2.773 ahead of the position-bucket arithmetic kept in float32). Not listed as
/// kept nodes: they compute nothing.
fn constants_for_kept(g: &GraphProto, mut kept: Vec<Option<String>>) -> Vec<Option<String>> {
    let in_bodies: HashSet<String> = (g.node.iter())
        .flat_map(|n| n.attribute.iter())
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
        .flat_map(crate::model::surgery::outer_reads)
        .chain(g.output.iter().map(|o| o.name.clone()))
        .collect();
    let only_fp32 = |value: &str, kept: &[Option<String>]| {
        let mut slots = (g.node.iter().zip(kept)).flat_map(|(n, k)| {
            (n.input.iter().enumerate())
                .filter(move |(_, i)| *i == value)
                .map(move |(s, _)| needs_fp32(n, s, k.is_some()))
        });
        let first = slots.next();
        first == Some(true) && slots.all(|x| x) && !in_bodies.contains(value)
    };
    for i in 0..g.node.len() {
        let n = &g.node[i];
        let single = n.output.len() == 1;
        if kept[i].is_none() && n.op_type == "Constant" && single && only_fp32(&n.output[0], &kept)
        {
            kept[i] = Some("a constant only float32 nodes read".into());
        }
    }
    kept
}

/// Where each float32 value will live (FLOAT or the target type `code`), on top of `outer_storage`: the main
/// graph's real inputs stay float32, initializers only float32 slots read stay float32, and kept nodes' outputs
/// stay float32.
fn plan_storage(
    g: &GraphProto,
    code: i32,
    main: bool,
    types: &HashMap<String, i32>,
    kept: &[Option<String>],
    outer_storage: &HashMap<String, i32>,
) -> HashMap<String, i32> {
    let is_float = |v: &str| types.get(v) == Some(&FLOAT);
    let init_names: HashSet<String> = g.initializer.iter().map(|t| t.name.clone()).collect();
    let mut storage: HashMap<String, i32> = outer_storage.clone();
    for i in g.input.iter().filter(|i| is_float(&i.name)) {
        let real_input = !init_names.contains(&i.name);
        storage.insert(
            i.name.clone(),
            if main && real_input { FLOAT } else { code },
        );
    }
    for t in g.initializer.iter().filter(|t| t.data_type == FLOAT) {
        let all_fp32 = g.node.iter().zip(kept).all(|(n, k)| {
            n.input
                .iter()
                .enumerate()
                .filter(|(_, i)| **i == t.name)
                .all(|(s, _)| needs_fp32(n, s, k.is_some()))
        });
        storage.insert(t.name.clone(), if all_fp32 { FLOAT } else { code });
    }
    for (n, k) in g.node.iter().zip(kept) {
        for o in n.output.iter().filter(|o| is_float(o)) {
            storage.insert(o.clone(), if k.is_some() { FLOAT } else { code });
        }
    }
    storage
}

/// Converts what a converted node holds: its dtype-bearing attributes and its bodies (`If`/`Loop`/`Scan`), which
/// see `types` and `storage` of the enclosing graphs.
fn convert_node(
    n: &mut NodeProto,
    ctx: &mut Ctx,
    types: &HashMap<String, i32>,
    storage: &HashMap<String, i32>,
) -> Result<()> {
    convert_attributes(n, ctx)?;
    for a in n.attribute.iter_mut() {
        if let Some(b) = a.g.as_mut() {
            convert_graph(b, ctx, false, types, storage)?;
        }
        for b in a.graphs.iter_mut() {
            convert_graph(b, ctx, false, types, storage)?;
        }
    }
    Ok(())
}

/// Makes the declared types of inputs and value_info follow `storage`, and converts the initializers stored in
/// the target type.
fn apply_storage(g: &mut GraphProto, ctx: &mut Ctx, storage: &HashMap<String, i32>) -> Result<()> {
    for i in g.input.iter_mut() {
        if let (Some(FLOAT), Some(&s)) = (declared(i), storage.get(&i.name)) {
            set_declared(i, s);
        }
    }
    g.value_info
        .retain(|vi| storage.contains_key(&vi.name) || declared(vi) != Some(FLOAT));
    for vi in g.value_info.iter_mut() {
        if let (Some(FLOAT), Some(&s)) = (declared(vi), storage.get(&vi.name)) {
            set_declared(vi, s);
        }
    }
    for t in g.initializer.iter_mut() {
        if storage.get(&t.name) == Some(&ctx.code) {
            convert_tensor(t, ctx)?;
        }
    }
    Ok(())
}

pub(super) fn suffix_of(code: i32, ctx: &Ctx) -> &'static str {
    if code == FLOAT {
        "fp32"
    } else {
        ctx.opts.to.suffix()
    }
}
