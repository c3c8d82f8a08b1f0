//! How a node is cut when one of its values exceeds the adapter's storage-binding limit ([`crate::wgpu::
//! split`] runs the slabs): convolutions by output rows (input rows with their halo, pads rewritten per slab),
//! pools and normalizations by channel, matrix products by batch, rows or columns, row-wise ops (Softmax,
//! LayerNormalization, reductions) along a kept axis, layout ops (Transpose, Concat, Split, Gather, Pad, Expand,
//! Resize, Slice, Where) along an axis they do not move; ConvTranspose by output rows (the input rows that reach them),
//! ungrouped Conv and ConvTranspose also by output channels. Plans come in order of preference; a node with none (a
//! Softmax over one long row...) runs on the host when a value is beyond the limit.

use super::linalg::geometry;
use super::{axis, broadcast};
use crate::wgpu::ctx::Ctx;
use crate::wgpu::split::{Follow, Plan};

/// What the plan builders share: the first input's shape and the node's input count.
struct Cut<'a> {
    x: &'a [usize],
    n_in: usize,
}

impl Cut<'_> {
    /// Every input in `ins` the same range along `a` (the rest whole).
    fn same(&self, a: usize, ins: &[usize]) -> Plan {
        Plan {
            axis: a,
            extent: self.x.get(a).copied().unwrap_or(0),
            inputs: (0..self.n_in)
                .map(|i| match ins.contains(&i) {
                    true => Follow::Same(a),
                    false => Follow::Whole,
                })
                .collect(),
        }
    }

    /// The first axis with more than one element that `ok` allows.
    fn first(&self, ok: impl Fn(usize) -> bool) -> Option<usize> {
        (0..self.x.len()).find(|&k| self.x[k] > 1 && ok(k))
    }

    /// Input 0 cut along the first axis with more than one element that `ok` allows (no plan when there is none).
    fn first_same(&self, ok: impl Fn(usize) -> bool) -> Vec<Plan> {
        self.first(ok)
            .map(|k| self.same(k, &[0]))
            .into_iter()
            .collect()
    }
}

/// The ways to cut `ctx.node`, best first.
pub fn plans(ctx: &Ctx) -> Vec<Plan> {
    let Some(x) = ctx.shape(0) else {
        return vec![];
    };
    let cut = Cut {
        x: &x,
        n_in: ctx.node.input.len(),
    };
    let rank = x.len();
    let op = ctx.node.op_type.as_str();
    let mut v: Vec<Plan> = match op {
        "Conv" => conv(ctx, &x)
            .into_iter()
            .chain(out_channels(ctx, 0))
            .collect(),
        "ConvTranspose" => conv_transpose(ctx, &x)
            .into_iter()
            .chain(out_channels(ctx, 1))
            .collect(),
        // MaxPool's indices count from the whole input's start: not cut.
        "MaxPool" if ctx.node.output.get(1).is_some_and(|o| !o.is_empty()) => vec![],
        "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" => {
            cut.first_same(|k| k < 2)
        }
        "InstanceNormalization" => instance_norm(&cut),
        // Parameters are folded on the host: cut the batch or the first spatial axis.
        "BatchNormalization" => cut.first_same(|k| k != 1),
        "MatMul" => matmul(ctx, &x),
        "Gemm" => gemm(ctx, &x),
        "Softmax" | "LogSoftmax" => {
            let default = if ctx.opset >= 13 { -1 } else { 1 };
            let a = axis(ctx.attr_i("axis", default), rank).unwrap_or(0);
            cut.first_same(|k| if ctx.opset >= 13 { k != a } else { k < a })
        }
        "LayerNormalization" => {
            let a = axis(ctx.attr_i("axis", -1), rank).unwrap_or(0);
            cut.first_same(|k| k < a)
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSumExp" | "ReduceLogSum" => reduce(ctx, &x),
        "Transpose" => transpose(ctx, &cut),
        "Concat" => {
            let c = axis(ctx.attr_i("axis", 0), rank);
            let all: Vec<usize> = (0..cut.n_in).collect();
            cut.first(|k| Some(k) != c)
                .map(|k| cut.same(k, &all))
                .into_iter()
                .collect()
        }
        "Split" => {
            let s = axis(ctx.attr_i("axis", 0), rank);
            cut.first_same(|k| Some(k) != s)
        }
        "Gather" => gather(ctx, &cut),
        "Pad" => pad(ctx, &cut),
        // Element-wise ops chunk by byte range; an operand that broadcasts and is itself beyond the limit needs slabs.
        "Where" | "Expand" | "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum"
        | "Mean" | "PRelu" | "Mod" => broadcasting(ctx),
        "Slice" => slice(ctx, &cut),
        "Resize" => resize(ctx, &x),
        _ => vec![],
    };
    v.retain(|p| p.extent > 1);
    v
}

/// By batch, or by channel with the scale and bias following it.
fn instance_norm(cut: &Cut) -> Vec<Plan> {
    let x = cut.x;
    let mut p: Vec<Plan> = (x[0] > 1).then(|| cut.same(0, &[0])).into_iter().collect();
    if x.len() > 1 && x[1] > 1 {
        let mut c = cut.same(1, &[0]);
        c.inputs[1] = Follow::Same(0);
        c.inputs[2] = Follow::Same(0);
        p.push(c);
    }
    p
}

/// Along the first output axis whose input axis has more than one element.
fn transpose(ctx: &Ctx, cut: &Cut) -> Vec<Plan> {
    let (x, rank) = (cut.x, cut.x.len());
    let perm: Vec<usize> = ctx
        .attr_ints("perm")
        .map(|p| p.iter().map(|&a| a as usize).collect())
        .unwrap_or_else(|| (0..rank).rev().collect());
    (0..perm.len())
        .find(|&k| perm[k] < rank && x[perm[k]] > 1)
        .map(|k| {
            let mut p = cut.same(perm[k], &[0]);
            p.axis = k;
            p
        })
        .into_iter()
        .collect()
}

/// Along a data axis that is not gathered (the output axis shifted by the indices' rank past it).
fn gather(ctx: &Ctx, cut: &Cut) -> Vec<Plan> {
    let g = axis(ctx.attr_i("axis", 0), cut.x.len());
    let ri = ctx.shape(1).map(|s| s.len()).unwrap_or(0);
    cut.first(|k| Some(k) != g)
        .map(|k| {
            let mut p = cut.same(k, &[0]);
            p.axis = if Some(k) > g { k + ri - 1 } else { k };
            p
        })
        .into_iter()
        .collect()
}

/// Along an axis without padding (pads known on the host, no `axes` input).
fn pad(ctx: &Ctx, cut: &Cut) -> Vec<Plan> {
    let rank = cut.x.len();
    let pads = if ctx.opset < 11 {
        ctx.attr_ints("pads")
    } else {
        ctx.ints(1)
    };
    match pads {
        Some(p) if p.len() == 2 * rank && !(ctx.opset >= 18 && ctx.has(3)) => {
            cut.first_same(|k| p[k] == 0 && p[k + rank] == 0)
        }
        _ => vec![],
    }
}

/// Along an axis that is not sliced.
fn slice(ctx: &Ctx, cut: &Cut) -> Vec<Plan> {
    let rank = cut.x.len();
    let sliced = match ctx.opset < 10 {
        true => ctx.attr_ints("axes").or_else(|| {
            ctx.attr_ints("starts")
                .map(|s| (0..s.len() as i64).collect())
        }),
        false if ctx.has(3) => ctx.ints(3),
        false => ctx.ints(1).map(|s| (0..s.len() as i64).collect()),
    };
    let sliced: Vec<usize> = sliced
        .unwrap_or_default()
        .iter()
        .filter_map(|&a| axis(a, rank))
        .collect();
    cut.first_same(|k| !sliced.contains(&k))
}

/// Output rows: each slab reads its input rows and halo; the pads of the first spatial axis are rewritten.
fn conv(ctx: &Ctx, x: &[usize]) -> Option<Plan> {
    let w = ctx.shape(1)?;
    if !(3..=4).contains(&x.len()) || w.len() != x.len() {
        return None;
    }
    let g = geometry(ctx, &x[2..], &w[2..], false, false)?;
    // A 1-D conv is held as H = 1 in slot 0, its axis in slot 1.
    let j = usize::from(x.len() == 3);
    let pads: Vec<i64> = match j {
        1 => vec![g.begin[1], g.end[1]],
        _ => vec![g.begin[0], g.begin[1], g.end[0], g.end[1]],
    }
    .into_iter()
    .map(|p| p as i64)
    .collect();
    let mut inputs = vec![Follow::Whole; ctx.node.input.len()];
    inputs[0] = Follow::Window {
        axis: 2,
        stride: g.s[j],
        begin: g.begin[j],
        extent: (g.k[j] - 1) * g.d[j] + 1,
        pads,
        pad_at: 0,
    };
    Some(Plan {
        axis: 2,
        extent: g.out[j],
        inputs,
    })
}

/// Output rows of a transposed convolution: each slab takes the input rows that reach it.
fn conv_transpose(ctx: &Ctx, x: &[usize]) -> Option<Plan> {
    let w = ctx.shape(1)?;
    if !(3..=4).contains(&x.len()) || w.len() != x.len() || ctx.attr_ints("output_shape").is_some()
    {
        return None;
    }
    let g = geometry(ctx, &x[2..], &w[2..], false, true)?;
    let j = usize::from(x.len() == 3);
    let r = x.len() - 2;
    let pads: Vec<i64> = match j {
        1 => vec![g.begin[1], g.end[1]],
        _ => vec![g.begin[0], g.begin[1], g.end[0], g.end[1]],
    }
    .into_iter()
    .map(|p| p as i64)
    .collect();
    let out_pad = ctx
        .attr_ints("output_padding")
        .filter(|v| v.len() == r)
        .unwrap_or_else(|| vec![0; r]);
    let mut inputs = vec![Follow::Whole; ctx.node.input.len()];
    inputs[0] = Follow::Scatter {
        axis: 2,
        stride: g.s[j],
        begin: g.begin[j],
        extent: (g.k[j] - 1) * g.d[j] + 1,
        pads,
        out_pad,
        pad_at: 0,
    };
    Some(Plan {
        axis: 2,
        extent: g.out[j],
        inputs,
    })
}

/// Output channels of an ungrouped convolution (the input bound whole; weights along `w_axis`, bias along 0).
fn out_channels(ctx: &Ctx, w_axis: usize) -> Option<Plan> {
    let w = ctx.shape(1)?;
    if ctx.attr_i("group", 1) != 1 || w.len() < 3 {
        return None;
    }
    let mut inputs = vec![Follow::Whole, Follow::Same(w_axis), Follow::Same(0)];
    inputs.truncate(ctx.node.input.len());
    Some(Plan {
        axis: 1,
        extent: w[w_axis],
        inputs,
    })
}

/// By batch (operands that have it), by rows of A (B whole) or by columns of B (A whole).
fn matmul(ctx: &Ctx, a: &[usize]) -> Vec<Plan> {
    let Some(b) = ctx.shape(1) else {
        return vec![];
    };
    let (ra, rb) = (a.len(), b.len());
    if ra < 2 || rb < 2 {
        return vec![];
    }
    let ro = ra.max(rb);
    let mut v = vec![];
    let batch = broadcast(&[&a[..ra - 2], &b[..rb - 2]]).unwrap_or_default();
    if ro >= 3 && batch.first().is_some_and(|&d| d > 1) {
        let follow = |s: &[usize]| match s.len() == ro && s[0] > 1 {
            true => Follow::Same(0),
            false => Follow::Whole,
        };
        v.push(Plan {
            axis: 0,
            extent: batch[0],
            inputs: vec![follow(a), follow(&b)],
        });
    }
    v.push(Plan {
        axis: ro - 2,
        extent: a[ra - 2],
        inputs: vec![Follow::Same(ra - 2), Follow::Whole],
    });
    v.push(Plan {
        axis: ro - 1,
        extent: b[rb - 1],
        inputs: vec![Follow::Whole, Follow::Same(rb - 1)],
    });
    v
}

/// By rows of the output (A's rows, C's when it has them) or by columns (B's, C's).
fn gemm(ctx: &Ctx, a: &[usize]) -> Vec<Plan> {
    let (Some(b), 2) = (ctx.shape(1), a.len()) else {
        return vec![];
    };
    if b.len() != 2 {
        return vec![];
    }
    let ta = usize::from(ctx.attr_i("transA", 0) != 0);
    let tb = usize::from(ctx.attr_i("transB", 0) != 0);
    let c = ctx
        .has(2)
        .then(|| ctx.shape(2))
        .flatten()
        .unwrap_or_default();
    let c_rows = match c.len() == 2 && c[0] > 1 {
        true => Follow::Same(0),
        false => Follow::Whole,
    };
    let c_cols = match c.last().is_some_and(|&d| d > 1) {
        true => Follow::Same(c.len() - 1),
        false => Follow::Whole,
    };
    let n_in = ctx.node.input.len();
    let mut rows = vec![Follow::Same(ta), Follow::Whole, c_rows];
    let mut cols = vec![Follow::Whole, Follow::Same(1 - tb), c_cols];
    rows.truncate(n_in);
    cols.truncate(n_in);
    vec![
        Plan {
            axis: 0,
            extent: a[ta],
            inputs: rows,
        },
        Plan {
            axis: 1,
            extent: b[1 - tb],
            inputs: cols,
        },
    ]
}

/// Along an axis that is not reduced.
fn reduce(ctx: &Ctx, x: &[usize]) -> Vec<Plan> {
    let op = ctx.node.op_type.as_str();
    let from_input = ctx.opset >= if op == "ReduceSum" { 13 } else { 18 };
    let axes = match from_input {
        true if ctx.has(1) => ctx.ints(1).unwrap_or_default(),
        true => vec![],
        false => ctx.attr_ints("axes").unwrap_or_default(),
    };
    if axes.is_empty() {
        return vec![];
    }
    let red: Vec<usize> = axes.iter().filter_map(|&a| axis(a, x.len())).collect();
    let keep = ctx.attr_i("keepdims", 1) != 0;
    let Some(k) = (0..x.len()).find(|k| x[*k] > 1 && !red.contains(k)) else {
        return vec![];
    };
    let mut inputs = vec![Follow::Whole; ctx.node.input.len()];
    inputs[0] = Follow::Same(k);
    let out_axis = match keep {
        true => k,
        false => k - red.iter().filter(|&&r| r < k).count(),
    };
    vec![Plan {
        axis: out_axis,
        extent: x[k],
        inputs,
    }]
}

/// Where, Expand and broadcasting element-wise ops: along an output axis; inputs that broadcast along it are bound
/// whole, Expand's target shape gets the slab's length.
fn broadcasting(ctx: &Ctx) -> Vec<Plan> {
    let expand = ctx.node.op_type == "Expand";
    let shapes: Vec<Vec<usize>> = match expand {
        true => {
            let target: Vec<usize> = ctx
                .ints(1)
                .unwrap_or_default()
                .iter()
                .map(|&d| d.max(0) as usize)
                .collect();
            vec![ctx.shape(0).unwrap_or_default(), target]
        }
        false => (0..ctx.node.input.len())
            .map(|i| ctx.shape(i).unwrap_or_default())
            .collect(),
    };
    let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    let Some(out) = broadcast(&refs) else {
        return vec![];
    };
    let ro = out.len();
    let Some(k) = (0..ro).find(|&k| out[k] > 1) else {
        return vec![];
    };
    let inputs = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let aligned = (k + s.len()).checked_sub(ro);
            match (expand && i == 1, aligned) {
                (true, Some(a)) => Follow::Sizes(a),
                (false, Some(a)) if s[a] > 1 => Follow::Same(a),
                _ => Follow::Whole,
            }
        })
        .collect();
    vec![Plan {
        axis: k,
        extent: out[k],
        inputs,
    }]
}

/// Along the batch or channel axis when Resize keeps it (sizes, when given, get the slab's length).
fn resize(ctx: &Ctx, x: &[usize]) -> Vec<Plan> {
    if x.len() != 4 {
        return vec![];
    }
    let sizes = ctx.has(3).then(|| ctx.ints(3)).flatten();
    let scales = ctx
        .has(2)
        .then(|| ctx.floats(2))
        .flatten()
        .unwrap_or_default();
    let kept = |k: usize| match &sizes {
        Some(s) => s.get(k) == Some(&(x[k] as i64)),
        None => scales.get(k) == Some(&1.0),
    };
    let Some(k) = [1, 0].into_iter().find(|&k| x[k] > 1 && kept(k)) else {
        return vec![];
    };
    let mut inputs = vec![Follow::Whole; ctx.node.input.len()];
    inputs[0] = Follow::Same(k);
    if sizes.is_some() {
        inputs[3] = Follow::Sizes(k);
    }
    vec![Plan {
        axis: k,
        extent: x[k],
        inputs,
    }]
}
