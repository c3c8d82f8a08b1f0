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

use tract_onnx::pb::{type_proto, GraphProto, ModelProto, NodeProto};

use super::inputs::Inputs;

mod rewrite;
use crate::surgery::value_info;
use rewrite::identity;

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
            "Identity" | "Optional" | "OptionalGetElement" | "OptionalHasElement" => reads_seq,
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
                kept.push(value_info(e, elem_type, None));
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
                out.push(value_info(&name, elem_type, None));
            }
        }
        g.output = out;
        Ok(count)
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
    use super::rewrite::{position, sizes};
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
