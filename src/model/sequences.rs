//! ONNX sequence values (`seq(tensor)`), resolved for the inputs at hand. tract has no sequence type, so before the
//! run every sequence the main graph builds is followed element by element and its ops become the tensor ops they
//! amount to: `SplitToSequence` a `Split` (and a `Squeeze` per element without `keepdims`), `SequenceAt` an
//! `Identity` of the element it picks, `ConcatFromSequence` a `Concat` (after an `Unsqueeze` each with `new_axis`),
//! `SequenceLength` a constant, `SequenceMap` a copy of its body per element; `SequenceConstruct`, `SequenceEmpty`,
//! `SequenceInsert`, `SequenceErase` and an `Identity` of a sequence only rearrange which tensors a sequence holds. A sequence output `s` becomes the tensor
//! outputs `s[0]`, `s[1]`, …, and a sequence input `s` the tensor inputs `s[0]`, `s[1]`, … its value holds. Both
//! sides run the result: the rewrite moves data and computes nothing, so every element is a named value compared
//! like any other. A position or split that cannot be computed before the run, or a sequence read by any other node
//! (a `Loop` or `If` phantom cannot resolve first, an `Optional`), is refused with the node named.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{type_proto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};

use super::inputs::Inputs;
use super::proto::{int_attr, ints_attr, scalar_i64};

/// The ops that build or read a sequence.
pub const OPS: &[&str] = &[
    "SequenceConstruct",
    "SequenceEmpty",
    "SplitToSequence",
    "SequenceAt",
    "SequenceInsert",
    "SequenceErase",
    "SequenceLength",
    "ConcatFromSequence",
    "SequenceMap",
];

/// Name of element `k` of the sequence input or output `name`.
pub fn element(name: &str, k: usize) -> String {
    format!("{name}[{k}]")
}

/// Whether `g` holds a sequence op or a sequence input or output (by the names in `declared`).
pub fn present(g: &GraphProto, declared: &HashSet<String>) -> bool {
    g.node.iter().any(|n| OPS.contains(&n.op_type.as_str()))
        || (g.input.iter().chain(&g.output)).any(|v| declared.contains(&v.name))
}

/// The sequences of a main graph, rewritten into tensors ([module docs](self)) over one or more passes: control flow
/// resolved between passes (a `Loop` whose trip count a `SequenceLength` gives, unrolled once that is a constant)
/// brings more sequence ops to the top level, and what each sequence holds is kept from pass to pass.
pub struct Sequences {
    /// The main graph's sequence inputs and outputs, with their element types.
    declared: HashMap<String, type_proto::Tensor>,
    /// Each sequence's elements, by the tensor names that hold them.
    seqs: HashMap<String, Vec<String>>,
    opset: i64,
    lowered: usize,
    /// Whether the graph has had sequences (`None` before the first pass).
    active: Option<bool>,
}

impl Sequences {
    /// `declared`: the main graph's sequence-typed inputs and outputs with their element type.
    pub fn new(m: &ModelProto, declared: HashMap<String, type_proto::Tensor>) -> Sequences {
        Sequences {
            declared,
            seqs: HashMap::new(),
            opset: super::inline::opset_of(m),
            lowered: 0,
            active: None,
        }
    }

    /// Rewrites every sequence node whose sequences are known by now; returns whether it rewrote any. Nodes that
    /// read a sequence not built yet (a `Loop`'s output) or that no rewrite covers wait for a later pass or for
    /// [`Sequences::finish`].
    pub fn pass(&mut self, m: &mut ModelProto, inputs: &Inputs) -> Result<bool, String> {
        if self.active != Some(true) {
            // Checked again each pass: an unrolled Loop's body may bring the first sequence ops.
            let names: HashSet<String> = self.declared.keys().cloned().collect();
            if !m.graph.as_ref().is_some_and(|g| present(g, &names)) {
                self.active = Some(false);
                return Ok(false);
            }
            self.active = Some(true);
            let declared = self.declared.clone();
            self.inputs(m.graph.as_mut().expect("checked"), &declared, inputs)?;
        }
        topo_sort(m.graph.as_mut().expect("checked"));
        let mut changed = false;
        let mut at = 0;
        while at < m.graph.as_ref().expect("checked").node.len() {
            let n = m.graph.as_ref().expect("checked").node[at].clone();
            if !self.ready(&n) {
                at += 1;
                continue;
            }
            let (nodes, inits) = self.node(m, &n, inputs)?;
            let g = m.graph.as_mut().expect("checked");
            let added = nodes.len();
            g.node.splice(at..=at, nodes);
            g.initializer.extend(inits);
            // A SequenceMap's copies of its body may hold sequence ops themselves: they are looked at next.
            if n.op_type != "SequenceMap" {
                at += added;
            }
            self.lowered += 1;
            changed = true;
        }
        Ok(changed)
    }

    /// Whether `n` is a sequence node this pass can rewrite: a sequence op (or an `Identity` of a sequence) whose
    /// sequence input is known.
    fn ready(&self, n: &NodeProto) -> bool {
        let reads_seq = n.input.iter().any(|i| self.seqs.contains_key(i));
        match n.op_type.as_str() {
            "SequenceConstruct" | "SequenceEmpty" | "SplitToSequence" => true,
            "Identity" => reads_seq,
            op if OPS.contains(&op) => n.input.first().is_some_and(|s| self.seqs.contains_key(s)),
            _ => false,
        }
    }

    /// After the last pass: the sequence outputs become their elements, and a note says what was done (`None` when
    /// the graph has no sequence); or why a sequence is left that phantom cannot follow.
    pub fn finish(self, m: &mut ModelProto) -> Result<Option<String>, String> {
        if self.active != Some(true) {
            return Ok(None);
        }
        let g = m.graph.as_mut().expect("active");
        for n in &g.node {
            if let Some(s) = n.input.iter().find(|i| self.seqs.contains_key(*i)) {
                return Err(format!(
                    "the sequence `{s}` is read by {} node `{}`, which phantom cannot run on a sequence yet",
                    n.op_type, n.name
                ));
            }
            if OPS.contains(&n.op_type.as_str()) {
                return Err(format!(
                    "{} node `{}` reads a sequence phantom cannot follow before the run (built by a Loop or If it \
                     cannot resolve)",
                    n.op_type, n.name
                ));
            }
        }
        let declared = self.declared.clone();
        let outputs = self.outputs(g, &declared)?;
        Ok(Some(format!(
            "{} sequence node(s) rewritten as the tensor ops they amount to for these inputs{}; both sides run the \
             result and every element is compared",
            self.lowered,
            match outputs {
                0 => String::new(),
                k => format!(", {k} sequence output(s) compared element by element as `<name>[k]`"),
            }
        )))
    }
}

impl Sequences {
    /// Each sequence input `s` becomes the tensor inputs `s[k]` the prepared inputs hold.
    fn inputs(
        &mut self,
        g: &mut GraphProto,
        declared: &HashMap<String, type_proto::Tensor>,
        inputs: &Inputs,
    ) -> Result<(), String> {
        let mut kept = vec![];
        for v in std::mem::take(&mut g.input) {
            let Some(elem_type) = declared.get(&v.name).map(|t| t.elem_type) else {
                kept.push(v);
                continue;
            };
            let elements: Vec<String> = (0..)
                .map(|k| element(&v.name, k))
                .take_while(|e| inputs.tensors.iter().any(|(n, _)| n == e))
                .collect();
            for e in &elements {
                kept.push(tensor_value(e, elem_type));
            }
            self.seqs.insert(v.name, elements);
        }
        g.input = kept;
        Ok(())
    }

    /// Each sequence output `s` becomes the tensor outputs `s[k]`, an `Identity` of each element. Returns how many
    /// sequence outputs there were.
    fn outputs(
        &self,
        g: &mut GraphProto,
        declared: &HashMap<String, type_proto::Tensor>,
    ) -> Result<usize, String> {
        let mut out = vec![];
        let mut count = 0;
        for v in std::mem::take(&mut g.output) {
            let Some(elements) = self.seqs.get(&v.name) else {
                if declared.contains_key(&v.name) {
                    return Err(format!(
                        "the sequence output `{}` is not built by sequence ops phantom can follow before the run \
                         (a Loop or If it cannot resolve, or a SequenceMap)",
                        v.name
                    ));
                }
                out.push(v);
                continue;
            };
            count += 1;
            let elem_type = declared.get(&v.name).map_or(0, |t| t.elem_type);
            for (k, e) in elements.iter().enumerate() {
                let name = element(&v.name, k);
                if *e != name {
                    g.node
                        .push(identity(&format!("{}/element{k}", v.name), e, &name));
                }
                out.push(tensor_value(&name, elem_type));
            }
        }
        g.output = out;
        Ok(count)
    }

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
    fn node(
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
            "Identity" => {
                let e = self.elements(&n.input[0], n)?;
                self.seqs.insert(out, e);
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
                nodes.push(NodeProto {
                    name: n.name.clone(),
                    op_type: "Constant".into(),
                    output: vec![out],
                    attribute: vec![tensor_attr(c)],
                    ..Default::default()
                });
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
        anyhow_empty(e, n)?;
        let axis = attr_int(n, "axis").ok_or_else(|| missing(n, "axis attribute"))?;
        if attr_int(n, "new_axis").unwrap_or(0) != 0 {
            super::unroll::stack(&n.name, 0, e, out, axis, self.opset, nodes, inits);
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
        anyhow_axis(axis, rank, n)?;
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
fn sizes(split: Option<Vec<i64>>, len: i64, n: &NodeProto) -> Result<Vec<i64>, String> {
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

fn anyhow_empty(e: &[String], n: &NodeProto) -> Result<(), String> {
    match e.is_empty() {
        true => Err(format!(
            "the model is invalid: ConcatFromSequence `{}` concatenates an empty sequence",
            n.name
        )),
        false => Ok(()),
    }
}

fn anyhow_axis(axis: i64, rank: i64, n: &NodeProto) -> Result<(), String> {
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
fn position(p: i64, len: usize, n: &NodeProto) -> Result<usize, String> {
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
    let t = super::inline::value_of(m, v, inputs).ok_or_else(|| {
        format!(
            "{} `{}`: phantom cannot compute `{v}` before the run, and needs it to follow the sequence",
            n.op_type, n.name
        )
    })?;
    Ok(t.to_f64_array().iter().map(|&x| x as i64).collect())
}

/// The shape of tensor `v` for these inputs.
fn shape_of(m: &ModelProto, v: &str, inputs: &Inputs, n: &NodeProto) -> Result<Vec<usize>, String> {
    let t = super::inline::value_of(m, v, inputs).ok_or_else(|| {
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

fn identity(name: &str, from: &str, to: &str) -> NodeProto {
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

/// A tensor value of element type `elem_type` (0: unknown) and unknown shape.
fn tensor_value(name: &str, elem_type: i32) -> ValueInfoProto {
    use tract_onnx::pb::TypeProto;
    ValueInfoProto {
        name: name.into(),
        r#type: (elem_type != 0).then(|| TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type,
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Orders `g`'s nodes so that each comes after the producers of its inputs (Kahn's algorithm, stable); nodes in a
/// cycle keep their place at the end, where import reports them.
fn topo_sort(g: &mut GraphProto) {
    let producer: HashMap<&str, usize> = (g.node.iter().enumerate())
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let mut placed = vec![false; g.node.len()];
    let mut order = Vec::with_capacity(g.node.len());
    let mut progress = true;
    while progress {
        progress = false;
        for i in 0..g.node.len() {
            let ready = !placed[i]
                && g.node[i].input.iter().all(|v| {
                    producer
                        .get(v.as_str())
                        .is_none_or(|&p| placed[p] || p == i)
                });
            if ready {
                placed[i] = true;
                order.push(i);
                progress = true;
            }
        }
    }
    order.extend((0..g.node.len()).filter(|&i| !placed[i]));
    let mut old: Vec<Option<NodeProto>> =
        std::mem::take(&mut g.node).into_iter().map(Some).collect();
    g.node = order
        .into_iter()
        .map(|i| old[i].take().expect("once"))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str) -> NodeProto {
        NodeProto {
            name: "n".into(),
            op_type: op.into(),
            ..Default::default()
        }
    }

    #[test]
    fn split_sizes_follow_the_spec() {
        let n = node("SplitToSequence");
        assert_eq!(sizes(None, 3, &n).unwrap(), [1, 1, 1]);
        assert_eq!(sizes(Some(vec![2]), 5, &n).unwrap(), [2, 2, 1]);
        assert_eq!(sizes(Some(vec![1, 4]), 5, &n).unwrap(), [1, 4]);
        assert!(sizes(Some(vec![1, 3]), 5, &n).is_err());
        assert!(sizes(Some(vec![0]), 5, &n).is_err());
    }

    #[test]
    fn positions_count_from_either_end() {
        let n = node("SequenceAt");
        assert_eq!(position(-1, 3, &n).unwrap(), 2);
        assert_eq!(position(0, 3, &n).unwrap(), 0);
        assert!(position(3, 3, &n).is_err());
        assert!(position(-4, 3, &n).is_err());
    }
}
