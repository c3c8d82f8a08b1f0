//! The casts a float16/bfloat16 conversion inserts: outputs cast back where their readers keep float32, and the
//! inputs of nodes kept in float32 cast from the converted values (shapes declared like the values they cast).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{GraphProto, NodeProto, ValueInfoProto};

use super::convert::{cast_node, needs_fp32, suffix_of, Ctx, ANY_INPUT};
use crate::model::types::{set_declared, FLOAT};

/// The declared shapes of graph inputs and outputs, given to the values cast from or to them too: without them
/// ONNX Runtime's memory planner may let an in-place op (GroupQueryAttention's present over its past) reuse a
/// cast buffer of another size and fail at run time.
pub(super) struct CastShapes {
    pub(super) io: HashMap<String, ValueInfoProto>,
    /// The declarations made for cast values, to add to the graph's `value_info`.
    pub(super) infos: Vec<ValueInfoProto>,
}

impl CastShapes {
    /// The declared inputs and outputs of `g`, and no cast values yet.
    pub(super) fn new(g: &GraphProto) -> CastShapes {
        let io = g
            .input
            .iter()
            .chain(g.output.iter())
            .map(|v| (v.name.clone(), v.clone()))
            .collect();
        CastShapes { io, infos: vec![] }
    }

    /// Declares `name`, of type `code`, with the shape of `from` when `from` is a graph input or output.
    fn shaped_like(&mut self, from: &str, name: &str, code: i32) {
        if let Some(vi) = self.io.get(from) {
            let mut vi = vi.clone();
            vi.name = name.to_string();
            set_declared(&mut vi, code);
            self.infos.push(vi);
        }
    }
}

/// Outputs whose stored type differs from what the graph declares: the producer writes a renamed value and a
/// Cast produces the declared one. Returns those Casts (to run after every node) and the renamed values.
pub(super) fn cast_outputs(
    g: &mut GraphProto,
    ctx: &mut Ctx,
    main: bool,
    types: &HashMap<String, i32>,
    storage: &mut HashMap<String, i32>,
    shapes: &mut CastShapes,
) -> (Vec<NodeProto>, HashSet<String>) {
    let mut tail: Vec<NodeProto> = vec![];
    let mut renamed: HashSet<String> = HashSet::new();
    for o in g
        .output
        .iter_mut()
        .filter(|o| types.get(&o.name) == Some(&FLOAT))
    {
        let want = if main { FLOAT } else { ctx.code };
        if !main {
            set_declared(o, ctx.code);
        }
        let have = storage.get(&o.name).copied().unwrap_or(FLOAT);
        if have == want {
            continue;
        }
        let inner = unused_output_name(&g.node, &o.name, have, ctx);
        if !rename_produced(&mut g.node, &o.name, &inner) {
            // An input or initializer passed straight through keeps its type.
            continue;
        }
        storage.insert(inner.clone(), have);
        renamed.insert(inner.clone());
        let mut cast_name = format!("phantom_cast_{}", o.name);
        if g.node.iter().any(|n| n.name == cast_name) {
            ctx.counter += 1;
            cast_name = format!("phantom_cast{}_{}", ctx.counter, o.name);
        }
        shapes.shaped_like(&o.name, &inner, have);
        tail.push(cast_node(cast_name, &inner, &o.name, want));
    }
    (tail, renamed)
}

/// The name output `output`, stored as `have`, is renamed to: `{output}_phantom_{suffix}`, or with a counter when
/// a node already uses that name (a model converted before).
fn unused_output_name(nodes: &[NodeProto], output: &str, have: i32, ctx: &mut Ctx) -> String {
    let mut inner = format!("{}_phantom_{}", output, suffix_of(have, ctx));
    while nodes
        .iter()
        .any(|n| n.output.contains(&inner) || n.input.contains(&inner))
    {
        ctx.counter += 1;
        inner = format!(
            "{}_phantom_{}_{}",
            output,
            suffix_of(have, ctx),
            ctx.counter
        );
    }
    inner
}

/// Renames value `from` to `to` where a node produces it and where nodes read it; false (nothing renamed) when no
/// node produces it.
fn rename_produced(nodes: &mut [NodeProto], from: &str, to: &str) -> bool {
    let produced = nodes.iter_mut().any(|n| {
        let hit = n.output.iter_mut().find(|x| **x == from);
        hit.map(|x| *x = to.to_string()).is_some()
    });
    if !produced {
        return false;
    }
    for n in nodes.iter_mut() {
        for i in n.input.iter_mut().filter(|i| **i == from) {
            *i = to.to_string();
        }
    }
    true
}

/// The Casts put in front of node inputs whose stored type is not what the node reads: one per value and type,
/// shared by every node that reads it.
pub(super) struct InputCasts<'a> {
    pub(super) main: bool,
    /// Every name the graph uses before the casts: a cast value whose plain name is taken gets a counter.
    pub(super) existing: HashSet<String>,
    /// The cast value made for each (value, type).
    pub(super) made: HashMap<(String, i32), String>,
    pub(super) types: &'a HashMap<String, i32>,
    pub(super) storage: &'a HashMap<String, i32>,
    pub(super) renamed: &'a HashSet<String>,
}

impl InputCasts<'_> {
    /// Points the float inputs of `n` (a node kept in float32 when `kept`) at values of the type it reads, pushing
    /// onto `nodes` a Cast for each cast value made.
    pub(super) fn retype_inputs(
        &mut self,
        n: &mut NodeProto,
        kept: bool,
        ctx: &mut Ctx,
        nodes: &mut Vec<NodeProto>,
        shapes: &mut CastShapes,
    ) {
        let any_type = ANY_INPUT.contains(&n.op_type.as_str());
        for s in 0..n.input.len() {
            // CastLike's second input is the type it casts to: it reads the value as the converted graph holds it.
            let any = any_type && !(n.op_type == "CastLike" && s == 1);
            let v = n.input[s].clone();
            let float = self.types.get(&v) == Some(&FLOAT) || self.renamed.contains(&v);
            if v.is_empty() || !float || any {
                continue;
            }
            let have = self.storage.get(&v).copied().unwrap_or(FLOAT);
            let want = if needs_fp32(n, s, kept) {
                FLOAT
            } else {
                ctx.code
            };
            if have == want {
                continue;
            }
            n.input[s] = self.cast(&v, want, ctx, nodes, shapes);
        }
    }

    /// The name of `v` cast to `want`; the first time, the Cast making it is pushed onto `nodes`.
    fn cast(
        &mut self,
        v: &str,
        want: i32,
        ctx: &mut Ctx,
        nodes: &mut Vec<NodeProto>,
        shapes: &mut CastShapes,
    ) -> String {
        let (main, existing) = (self.main, &self.existing);
        self.made
            .entry((v.to_string(), want))
            .or_insert_with(|| {
                ctx.counter += 1;
                // Names must be unique across bodies too (both branches of an If may cast one outer value).
                let plain = format!("{v}_phantom_{}", suffix_of(want, ctx));
                let to = if main && !existing.contains(&plain) {
                    plain
                } else {
                    format!("{v}_phantom_{}_{}", suffix_of(want, ctx), ctx.counter)
                };
                nodes.push(cast_node(
                    format!("phantom_cast{}_{to}", ctx.counter),
                    v,
                    &to,
                    want,
                ));
                shapes.shaped_like(v, &to, want);
                ctx.out.inserted_casts += 1;
                to
            })
            .clone()
    }
}
