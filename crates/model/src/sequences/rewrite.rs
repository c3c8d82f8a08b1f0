//! The tensor ops each sequence op amounts to, once the sequences it reads are known ([`Sequences::node`]):
//! `SplitToSequence` a `Split` (a `Squeeze` per element without `keepdims`), `SequenceAt` an `Identity`,
//! `SequenceLength` a constant, `ConcatFromSequence` a `Concat`, `SequenceMap` a copy of its body per element; the
//! others only change which tensors a sequence holds.

use std::collections::HashMap;

use tract_onnx::pb::{ModelProto, NodeProto, TensorProto};

use super::{element, Sequences};
use crate::inputs::Inputs;
use crate::proto::{int_attr, ints_attr, scalar_i64};

impl Sequences {
    /// The elements of sequence `s`, read by node `n`.
    fn elements(&self, s: &str, n: &NodeProto) -> Result<Vec<String>, String> {
        self.seqs.get(s).cloned().ok_or_else(|| {
            format!(
                "{} node `{}` reads `{s}` as a sequence, and no sequence of that name is built before it",
                n.op_type, n.name
            )
        })
    }

    /// The tensor nodes and initializers that take the place of sequence node `n`.
    pub(super) fn node(
        &mut self,
        m: &ModelProto,
        n: &NodeProto,
        inputs: &Inputs,
    ) -> Result<(Vec<NodeProto>, Vec<TensorProto>), String> {
        let out = n.output.first().cloned().unwrap_or_default();
        let input = |k: usize| n.input.get(k).filter(|s| !s.is_empty()).cloned();
        let known = |v: &str| known_ints(m, v, inputs, n);
        let (mut nodes, mut inits) = (vec![], vec![]);
        match n.op_type.as_str() {
            "SequenceEmpty" => {
                self.seqs.insert(out, vec![]);
            }
            "SequenceConstruct" => {
                self.seqs.insert(out, n.input.clone());
            }
            // An optional that holds a sequence is that sequence: it has an element.
            "Identity" | "Optional" | "OptionalGetElement" => {
                let e = self.elements(&n.input[0], n)?;
                self.seqs.insert(out, e);
            }
            "OptionalHasElement" => {
                self.elements(&n.input[0], n)?;
                let c = TensorProto {
                    data_type: 9,
                    int32_data: vec![1],
                    ..Default::default()
                };
                nodes.push(constant(&n.name, c, &out));
            }
            "SequenceInsert" => {
                let mut e = self.elements(&n.input[0], n)?;
                let t = input(1).ok_or_else(|| missing(n, "tensor"))?;
                let at = match input(2) {
                    Some(p) => position(scalar(&known(&p)?, n)?, e.len() + 1, n)?,
                    None => e.len(),
                };
                e.insert(at, t);
                self.seqs.insert(out, e);
            }
            "SequenceErase" => {
                let mut e = self.elements(&n.input[0], n)?;
                let at = match input(1) {
                    Some(p) => position(scalar(&known(&p)?, n)?, e.len(), n)?,
                    None => position(-1, e.len(), n)?,
                };
                e.remove(at);
                self.seqs.insert(out, e);
            }
            "SequenceAt" => {
                let e = self.elements(&n.input[0], n)?;
                let p = input(1).ok_or_else(|| missing(n, "position"))?;
                let at = position(scalar(&known(&p)?, n)?, e.len(), n)?;
                nodes.push(identity(&n.name, &e[at], &out));
            }
            "SequenceLength" => {
                let e = self.elements(&n.input[0], n)?;
                let mut c = scalar_i64("value", e.len() as i64);
                c.name = String::new();
                nodes.push(constant(&n.name, c, &out));
            }
            "ConcatFromSequence" => {
                let e = self.elements(&n.input[0], n)?;
                self.concat(n, &e, &out, &mut nodes, &mut inits)?;
            }
            "SequenceMap" => {
                let outs = self.map(n, &mut nodes, &mut inits)?;
                self.seqs.extend(outs);
            }
            "SplitToSequence" => {
                let x = input(0).ok_or_else(|| missing(n, "input"))?;
                let split = input(1).map(|s| known(&s)).transpose()?;
                let shape = shape_of(m, &x, inputs, n)?;
                let e = self.split(n, &x, &shape, split, &mut nodes, &mut inits)?;
                self.seqs.insert(out, e);
            }
            other => return Err(format!("no rewrite for {other} node `{}`", n.name)),
        }
        Ok((nodes, inits))
    }

    /// `SequenceMap`: its body once per element of its first input, fed element j of each sequence input and each
    /// tensor input whole; its body's values are renamed `<node>/<j>/<value>` (nested bodies are refused). Returns
    /// the output sequences.
    fn map(
        &self,
        n: &NodeProto,
        nodes: &mut Vec<NodeProto>,
        inits: &mut Vec<TensorProto>,
    ) -> Result<Vec<(String, Vec<String>)>, String> {
        let body = (n.attribute.iter().find(|a| a.name == "body"))
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| missing(n, "body"))?;
        if body.node.iter().any(|b| {
            b.attribute
                .iter()
                .any(|a| a.g.is_some() || !a.graphs.is_empty())
        }) {
            return Err(format!(
                "SequenceMap `{}`: its body has a nested graph, which phantom cannot follow yet",
                n.name
            ));
        }
        let count = self.elements(&n.input[0], n)?.len();
        let prefix = match n.name.is_empty() {
            true => n.output.first().cloned().unwrap_or_default(),
            false => n.name.clone(),
        };
        let mut outs: Vec<Vec<String>> = vec![vec![]; n.output.len()];
        for j in 0..count {
            let mut rename: HashMap<String, String> = HashMap::new();
            for (k, (outer, inner)) in n.input.iter().zip(&body.input).enumerate() {
                let bound = match self.seqs.get(outer) {
                    Some(e) => e.get(j).cloned().ok_or_else(|| {
                        format!(
                            "SequenceMap `{}`: input {k} `{outer}` has {} elements, its first input {count}",
                            n.name,
                            e.len()
                        )
                    })?,
                    None => outer.clone(),
                };
                rename.insert(inner.name.clone(), bound);
            }
            let local = |v: &str| format!("{prefix}/{j}/{v}");
            for t in &body.initializer {
                rename.insert(t.name.clone(), local(&t.name));
                inits.push(TensorProto {
                    name: local(&t.name),
                    ..t.clone()
                });
            }
            for b in &body.node {
                for o in b.output.iter().filter(|o| !o.is_empty()) {
                    rename.insert(o.clone(), local(o));
                }
            }
            let renamed = |v: &String| rename.get(v).cloned().unwrap_or_else(|| v.clone());
            for (k, b) in body.node.iter().enumerate() {
                nodes.push(NodeProto {
                    name: local(&format!("{}#{k}", b.name)),
                    input: b.input.iter().map(renamed).collect(),
                    output: b.output.iter().map(renamed).collect(),
                    ..b.clone()
                });
            }
            for (k, o) in body.output.iter().enumerate().take(outs.len()) {
                outs[k].push(renamed(&o.name));
            }
        }
        Ok(n.output.iter().cloned().zip(outs).collect())
    }

    /// `ConcatFromSequence` of elements `e` into `out`.
    fn concat(
        &self,
        n: &NodeProto,
        e: &[String],
        out: &str,
        nodes: &mut Vec<NodeProto>,
        inits: &mut Vec<TensorProto>,
    ) -> Result<(), String> {
        nonempty(e, n)?;
        let axis = attr_int(n, "axis").ok_or_else(|| missing(n, "axis attribute"))?;
        if attr_int(n, "new_axis").unwrap_or(0) != 0 {
            crate::unroll::stack(&n.name, 0, e, out, axis, self.opset, nodes, inits);
        } else {
            nodes.push(NodeProto {
                name: n.name.clone(),
                op_type: "Concat".into(),
                input: e.to_vec(),
                output: vec![out.to_string()],
                attribute: vec![int_attr("axis", axis)],
                ..Default::default()
            });
        }
        Ok(())
    }

    /// `SplitToSequence` of `x` (of `shape`) by `split` (none: pieces of 1, squeezed without `keepdims`); returns the
    /// elements' names.
    fn split(
        &self,
        n: &NodeProto,
        x: &str,
        shape: &[usize],
        split: Option<Vec<i64>>,
        nodes: &mut Vec<NodeProto>,
        inits: &mut Vec<TensorProto>,
    ) -> Result<Vec<String>, String> {
        let rank = shape.len() as i64;
        let axis = attr_int(n, "axis").unwrap_or(0);
        axis_in_rank(axis, rank, n)?;
        let axis = axis.rem_euclid(rank.max(1));
        let len = shape[axis as usize] as i64;
        let squeeze = split.is_none() && attr_int(n, "keepdims").unwrap_or(1) == 0;
        let sizes = sizes(split, len, n)?;
        let out = &n.output[0];
        let pieces: Vec<String> = (0..sizes.len())
            .map(|k| match squeeze {
                true => format!("{out}[{k}].split"),
                false => element(out, k),
            })
            .collect();
        let mut s = NodeProto {
            name: n.name.clone(),
            op_type: "Split".into(),
            input: vec![x.to_string()],
            output: pieces.clone(),
            attribute: vec![int_attr("axis", axis)],
            ..Default::default()
        };
        match self.opset >= 13 {
            true => {
                let name = format!("{}/split", n.name);
                inits.push(ints_tensor(&name, &sizes));
                s.input.push(name);
            }
            false => s.attribute.push(ints_attr("split", sizes.clone())),
        }
        nodes.push(s);
        if !squeeze {
            return Ok(pieces);
        }
        let axes = format!("{}/axes", n.name);
        if self.opset >= 13 {
            inits.push(ints_tensor(&axes, &[axis]));
        }
        let mut elements = vec![];
        for (k, p) in pieces.iter().enumerate() {
            let e = element(out, k);
            let mut q = NodeProto {
                name: format!("{}/squeeze{k}", n.name),
                op_type: "Squeeze".into(),
                input: vec![p.clone()],
                output: vec![e.clone()],
                ..Default::default()
            };
            match self.opset >= 13 {
                true => q.input.push(axes.clone()),
                false => q.attribute.push(ints_attr("axes", vec![axis])),
            }
            nodes.push(q);
            elements.push(e);
        }
        Ok(elements)
    }
}

/// The sizes `SplitToSequence` cuts an axis of length `len` into: ones without `split`, equal pieces of a scalar
/// `split` (the last one shorter), or the listed sizes, which must add up to `len`.
pub(super) fn sizes(split: Option<Vec<i64>>, len: i64, n: &NodeProto) -> Result<Vec<i64>, String> {
    let sizes = match split.as_deref() {
        None => vec![1; len as usize],
        Some(&[s]) if s > 0 => {
            let whole = len / s;
            let mut v = vec![s; whole as usize];
            if len % s != 0 {
                v.push(len % s);
            }
            v
        }
        Some(list) if list.len() > 1 || len == 0 => list.to_vec(),
        Some(list) => {
            return Err(format!(
                "the model is invalid: SplitToSequence `{}` has split {list:?}",
                n.name
            ))
        }
    };
    if sizes.iter().any(|&s| s < 0) || sizes.iter().sum::<i64>() != len {
        return Err(format!(
            "the model is invalid: SplitToSequence `{}` splits an axis of {len} into {sizes:?}",
            n.name
        ));
    }
    Ok(sizes)
}

fn nonempty(e: &[String], n: &NodeProto) -> Result<(), String> {
    match e.is_empty() {
        true => Err(format!(
            "the model is invalid: ConcatFromSequence `{}` concatenates an empty sequence",
            n.name
        )),
        false => Ok(()),
    }
}

fn axis_in_rank(axis: i64, rank: i64, n: &NodeProto) -> Result<(), String> {
    match (-rank..rank).contains(&axis) {
        true => Ok(()),
        false => Err(format!(
            "the model is invalid: {} `{}` has axis {axis} for a rank-{rank} input",
            n.op_type, n.name
        )),
    }
}

fn missing(n: &NodeProto, what: &str) -> String {
    format!(
        "the model is invalid: {} `{}` has no {what}",
        n.op_type, n.name
    )
}

/// A position into a sequence of `len` elements (negative counts from the end), checked.
pub(super) fn position(p: i64, len: usize, n: &NodeProto) -> Result<usize, String> {
    let at = if p < 0 { p + len as i64 } else { p };
    match (0..len as i64).contains(&at) {
        true => Ok(at as usize),
        false => Err(format!(
            "{} `{}`: position {p} is outside a sequence of {} element(s) for these inputs",
            n.op_type,
            n.name,
            len.saturating_sub(usize::from(n.op_type == "SequenceInsert"))
        )),
    }
}

fn scalar(v: &[i64], n: &NodeProto) -> Result<i64, String> {
    match v {
        [p] => Ok(*p),
        _ => Err(format!(
            "the model is invalid: {} `{}` takes a scalar position, got {} values",
            n.op_type,
            n.name,
            v.len()
        )),
    }
}

/// The integer value of `v` for these inputs (an initializer, a `Constant`, or computed from the inputs).
fn known_ints(m: &ModelProto, v: &str, inputs: &Inputs, n: &NodeProto) -> Result<Vec<i64>, String> {
    let t = crate::inline::value_of(m, v, inputs).ok_or_else(|| {
        format!(
            "{} `{}`: phantom cannot compute `{v}` before the run, and needs it to follow the sequence",
            n.op_type, n.name
        )
    })?;
    Ok(t.to_f64_array().iter().map(|&x| x as i64).collect())
}

/// The shape of tensor `v` for these inputs.
fn shape_of(m: &ModelProto, v: &str, inputs: &Inputs, n: &NodeProto) -> Result<Vec<usize>, String> {
    let t = crate::inline::value_of(m, v, inputs).ok_or_else(|| {
        format!(
            "{} `{}`: phantom cannot compute the shape of `{v}` before the run, and needs it to follow the \
             sequence",
            n.op_type, n.name
        )
    })?;
    Ok(t.shape().to_vec())
}

fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

pub(super) fn identity(name: &str, from: &str, to: &str) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: "Identity".into(),
        input: vec![from.into()],
        output: vec![to.into()],
        ..Default::default()
    }
}

fn ints_tensor(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: 7,
        dims: vec![v.len() as i64],
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn tensor_attr(t: TensorProto) -> tract_onnx::pb::AttributeProto {
    tract_onnx::pb::AttributeProto {
        name: "value".into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Tensor as i32,
        t: Some(t),
        ..Default::default()
    }
}

/// A `Constant` node `name` of value `t`, its output `out`.
fn constant(name: &str, t: TensorProto, out: &str) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: "Constant".into(),
        output: vec![out.into()],
        attribute: vec![tensor_attr(t)],
        ..Default::default()
    }
}
