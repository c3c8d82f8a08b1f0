//! ONNX `Attention` (opsets 23 and 24) on the device, composed of phantom's shaders as the op's function body
//! composes it: the past keys and values put before the new ones (`present_key`/`present_value`, strided copies),
//! scores Q·Kᵀ·scale (the tiled matmul reading K transposed and each key/value head shared by its group of query
//! heads through strides), softcap `c·tanh(x/c)`, the additive bias, softmax (a row masked everywhere gives zeros,
//! as the ONNX reference implementation computes it), and the probabilities times V. Q, K, V may be 3-D (heads side
//! by side, `q_num_heads`/`kv_num_heads`) or 4-D. Output 3 holds the scores at the stage `qk_matmul_output_mode`
//! names.
//!
//! The bias (mask, causal frontier, sliding window, `nonpad_kv_seqlen` padding) is assembled on the host from the
//! mask's host copy: each term is 0 or −∞ except a float mask, so the sum is exact; the additions that meet the
//! scores run on the device. The rules are those of the reference's `onnx_attn_rows`.
//!
//! ONNX `RotaryEmbedding` (opset 23) rotates head vectors by their position's angles (`elementwise/rotary.wgsl`).

use super::layout::copy;
use super::linalg::{product, Mm};
use super::reduce::softmax_rows;
use super::{contiguous, finish, host, Row};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::wgpu::ctx::{upload_float, Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("Attention", attention),
    Row::new("RotaryEmbedding", rotary),
];

/// The extents of one node, heads split out.
#[derive(Clone, Copy, Debug)]
struct Geo {
    b: usize,
    nq: usize,
    nkv: usize,
    /// Queries (S), new keys (L), past keys (P).
    s: usize,
    l: usize,
    p: usize,
    h: usize,
    hv: usize,
    packed: bool,
}

impl Geo {
    fn keys(&self) -> usize {
        self.p + self.l
    }
}

/// The extents from the inputs' shapes, or why the node runs on the host.
fn geo(ctx: &Ctx) -> std::result::Result<Geo, String> {
    let shape = |i| {
        ctx.shape(i)
            .ok_or(format!("Attention: input {i} is missing"))
    };
    let (q, k, v) = (shape(0)?, shape(1)?, shape(2)?);
    let heads = |name| ctx.attr_i(name, 0).max(0) as usize;
    let mut g = match (q.len(), k.len(), v.len()) {
        (3, 3, 3) => {
            let (nq, nkv) = (heads("q_num_heads"), heads("kv_num_heads"));
            if nq == 0 || nkv == 0 || q[2] % nq != 0 || k[2] % nkv != 0 || v[2] % nkv != 0 {
                return Err("Attention: 3-D inputs whose widths do not split into heads".into());
            }
            let (h, hv) = (q[2] / nq, v[2] / nkv);
            let (b, s, l) = (q[0], q[1], k[1]);
            let (p, packed) = (0, true);
            Geo {
                b,
                nq,
                nkv,
                s,
                l,
                p,
                h,
                hv,
                packed,
            }
        }
        (4, 4, 4) => {
            let (b, nq, s, h, nkv, l, hv) = (q[0], q[1], q[2], q[3], k[1], k[2], v[3]);
            let (p, packed) = (0, false);
            Geo {
                b,
                nq,
                nkv,
                s,
                l,
                p,
                h,
                hv,
                packed,
            }
        }
        _ => return Err("Attention: Q, K and V neither all 3-D nor all 4-D".into()),
    };
    if g.nkv == 0
        || !g.nq.is_multiple_of(g.nkv)
        || k.last() != Some(&(g.h * if g.packed { g.nkv } else { 1 }))
    {
        return Err("Attention: query heads that do not share key/value heads evenly".into());
    }
    if ctx.has(4) || ctx.has(5) {
        match (ctx.shape(4), ctx.shape(5)) {
            (Some(pk), Some(pv)) if pk.len() == 4 && pv.len() == 4 && pk[2] == pv[2] => g.p = pk[2],
            _ => return Err("Attention: past_key and past_value of unusual shapes".into()),
        }
    }
    Ok(g)
}

fn attention(ctx: &mut Ctx) -> Result<Out> {
    if !(0..3).all(|i| ctx.is_float(i)) {
        return host("Attention of integer values");
    }
    let g = match geo(ctx) {
        Ok(g) => g,
        Err(why) => return host(why),
    };
    let t = g.keys();
    let kall = all_keys(ctx, g, 1, 4, g.h)?;
    let vall = all_keys(ctx, g, 2, 5, g.hv)?;
    let q = ctx.dev(0)?;
    let scale = match ctx.node.attribute.iter().find(|a| a.name == "scale") {
        Some(a) => a.f,
        None => (1.0 / (g.h as f64).sqrt()) as f32,
    };
    let group = g.nq / g.nkv;
    let (a_batch, a_rc) = match g.packed {
        true => ([g.s * g.nq * g.h, group * g.h, g.h], (g.nq * g.h, 1)),
        false => ([g.nq * g.s * g.h, group * g.s * g.h, g.s * g.h], (g.h, 1)),
    };
    let scores = Mm {
        a: &q,
        b: &kall,
        c: None,
        m: g.s,
        n: t,
        k: g.h,
        batch: vec![g.b, g.nkv, group],
        a_batch: a_batch.map(|v| v as i64).to_vec(),
        b_batch: vec![(g.nkv * t * g.h) as i64, (t * g.h) as i64, 0],
        a_rc: (a_rc.0 as i64, a_rc.1),
        b_rc: (1, g.h as i64),
        alpha: scale,
        beta: 0.0,
    };
    let Some(raw) = product(ctx, scores, vec![g.b, g.nq, g.s, t])? else {
        return host("Attention beyond the tiled matmul's limits");
    };
    let cap = ctx.attr_f("softcap", 0.0);
    let capped = match cap != 0.0 {
        true => {
            let x = super::elementwise::apply_unary(ctx, &raw, 33, 1.0 / cap, 0.0)?;
            let x = super::elementwise::apply_unary(ctx, &x, 5, 0.0, 0.0)?;
            super::elementwise::apply_unary(ctx, &x, 33, cap, 0.0)?
        }
        false => raw.clone(),
    };
    let biased = match bias(ctx, g) {
        Ok(None) => capped.clone(),
        Ok(Some(b)) => match super::elementwise::apply_binary(ctx, &capped, &b, 0)? {
            Some(v) => v,
            None => return host("Attention: a mask that does not broadcast"),
        },
        Err(why) => return host(why),
    };
    let probs = softmax_rows(ctx, &biased, (g.b * g.nq * g.s, t, 1), 2)?;
    let y = values(ctx, g, &probs, &vall)?;
    let Some(y) = y else {
        return host("Attention beyond the tiled matmul's limits");
    };
    let qk = match ctx.attr_i("qk_matmul_output_mode", 0) {
        0 => raw,
        1 => capped,
        2 => biased,
        _ => probs,
    };
    let outs = [y, kall, vall, qk]
        .into_iter()
        .map(|v| finish(ctx, v))
        .collect::<Result<Vec<_>>>()?;
    Ok(Out::Dev(outs))
}

/// Keys (input `new`, after its past `past`) of head size `h` as (B, Nkv, P + L, h): the present key or value.
fn all_keys(ctx: &mut Ctx, g: Geo, new: usize, past: usize, h: usize) -> Result<DevVal> {
    let shape = vec![g.b, g.nkv, g.keys(), h];
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let os = contiguous(&shape);
    if g.p > 0 {
        let pk = ctx.dev(past)?;
        let it = [g.b, g.nkv, g.p, h];
        copy(ctx, &pk, &out, &it, 0, &contiguous(&it), 0, &os)?;
    }
    let x = ctx.dev(new)?;
    let it = [g.b, g.nkv, g.l, h];
    let ins = match g.packed {
        true => [g.l * g.nkv * h, h, g.nkv * h, 1]
            .map(|v| v as i64)
            .to_vec(),
        false => contiguous(&it),
    };
    copy(ctx, &x, &out, &it, 0, &ins, (g.p * h) as i64, &os)?;
    Ok(out)
}

/// Probabilities (B, Nq, S, T) times the values (B, Nkv, T, Hv), laid out as Y: (B, Nq, S, Hv), or
/// (B, S, Nq·Hv) for 3-D inputs.
fn values(ctx: &mut Ctx, g: Geo, probs: &DevVal, vall: &DevVal) -> Result<Option<DevVal>> {
    let (t, group) = (g.keys(), g.nq / g.nkv);
    let mm = Mm {
        a: probs,
        b: vall,
        c: None,
        m: g.s,
        n: g.hv,
        k: t,
        batch: vec![g.b, g.nkv, group],
        a_batch: [g.nq * g.s * t, group * g.s * t, g.s * t]
            .map(|v| v as i64)
            .to_vec(),
        b_batch: vec![(g.nkv * t * g.hv) as i64, (t * g.hv) as i64, 0],
        a_rc: (t as i64, 1),
        b_rc: (g.hv as i64, 1),
        alpha: 1.0,
        beta: 0.0,
    };
    let Some(y4) = product(ctx, mm, vec![g.b, g.nq, g.s, g.hv])? else {
        return Ok(None);
    };
    if !g.packed {
        return Ok(Some(y4));
    }
    let out = ctx.output(vec![g.b, g.s, g.nq * g.hv], y4.dtype);
    let it = [g.b, g.nq, g.s, g.hv];
    let os = [g.s * g.nq * g.hv, g.hv, g.nq * g.hv, 1].map(|v| v as i64);
    copy(ctx, &y4, &out, &it, 0, &contiguous(&it), 0, &os)?;
    Ok(Some(out))
}

/// The additive bias over (B or 1, Nq or 1, S, T), uploaded; `None` when there is none; `Err` with why it cannot
/// be built here.
fn bias(ctx: &mut Ctx, g: Geo) -> std::result::Result<Option<DevVal>, String> {
    let t = g.keys();
    let mask = match ctx.has(3) {
        true => Some(
            ctx.host(3)
                .cloned()
                .ok_or("Attention: the mask is not on the host")?,
        ),
        false => None,
    };
    let nonpad = match ctx.has(6) {
        true => Some(
            ctx.ints(6)
                .ok_or("Attention: nonpad_kv_seqlen not on the host")?,
        ),
        false => None,
    };
    let rule = Rule {
        causal: ctx.attr_i("is_causal", 0) != 0,
        left: ctx.attr_i("left_window_size", -1),
        right: ctx.attr_i("right_window_size", -1),
        s: g.s,
        past: g.p as i64,
        nonpad,
    };
    if mask.is_none() && !rule.any() {
        return Ok(None);
    }
    if rule.nonpad.as_ref().is_some_and(|n| n.len() != g.b) {
        return Err("Attention: nonpad_kv_seqlen of another length than the batch".into());
    }
    let m = match &mask {
        Some(t) => Some(Mask::parse(t, [g.b, g.nq, g.s, g.keys()])?),
        None => None,
    };
    let bb = if rule.nonpad.is_some() || m.as_ref().is_some_and(|m| m.strides[0] != 0) {
        g.b
    } else {
        1
    };
    let bn = if m.as_ref().is_some_and(|m| m.strides[1] != 0) {
        g.nq
    } else {
        1
    };
    let mut v = Vec::with_capacity(bb * bn * g.s * t);
    for b in 0..bb {
        for n in 0..bn {
            for i in 0..g.s {
                let at = v.len();
                v.extend((0..t).map(|j| {
                    if rule.allowed(b, i, j) {
                        0.0
                    } else {
                        f64::NEG_INFINITY
                    }
                }));
                if let Some(m) = &m {
                    m.add(b, n, i, &mut v[at..]);
                }
            }
        }
    }
    let arr =
        ndarray::ArrayD::from_shape_vec(vec![bb, bn, g.s, t], v).map_err(|e| e.to_string())?;
    let name = format!("{} (attention bias)", ctx.node.name);
    upload_float(ctx.gpu, &Tensor::F64(arr), &name, &mut vec![])
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The causal, window and padding rules of one node.
struct Rule {
    causal: bool,
    left: i64,
    right: i64,
    s: usize,
    past: i64,
    nonpad: Option<Vec<i64>>,
}

impl Rule {
    fn any(&self) -> bool {
        self.causal || self.left >= 0 || self.right >= 0 || self.nonpad.is_some()
    }

    /// Whether query i of batch b may see key j (the frontier aligned bottom-right by the past length, or by
    /// `nonpad_kv_seqlen[b] − S`).
    fn allowed(&self, b: usize, i: usize, j: usize) -> bool {
        let offset = match &self.nonpad {
            Some(lens) => lens[b].saturating_sub(self.s as i64),
            None => self.past,
        };
        let (pos, j) = ((i as i64).saturating_add(offset), j as i64);
        let causal = !self.causal || j <= pos;
        let left = self.left < 0 || pos.saturating_sub(j) <= self.left;
        let right = self.right < 0 || j.saturating_sub(pos) <= self.right;
        let valid = self.nonpad.as_ref().is_none_or(|lens| j < lens[b]);
        causal && left && right && valid
    }
}

/// An attention mask right-aligned on (B, Nq, S, T): strides 0 on broadcast axes, keys past `width` at −∞.
struct Mask {
    v: Vec<f64>,
    strides: [usize; 3],
    width: usize,
}

impl Mask {
    fn parse(t: &Tensor, full: [usize; 4]) -> std::result::Result<Mask, String> {
        let shape = t.shape();
        let bad = || format!("Attention: a mask of shape {shape:?} for {full:?}");
        if !(1..=4).contains(&shape.len()) || shape[shape.len() - 1] > full[3] {
            return Err(bad());
        }
        let width = shape[shape.len() - 1];
        let lead = &shape[..shape.len() - 1];
        let (mut strides, mut acc) = ([0; 3], width);
        for (k, &d) in lead.iter().enumerate().rev() {
            let ax = 3 - lead.len() + k;
            if d != full[ax] && d != 1 {
                return Err(bad());
            }
            strides[ax] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        let v = match t {
            Tensor::Bool(a) => a
                .iter()
                .map(|&k| if k { 0.0 } else { f64::NEG_INFINITY })
                .collect(),
            _ => t.to_f64_array().iter().copied().collect(),
        };
        Ok(Mask { v, strides, width })
    }

    fn add(&self, b: usize, n: usize, i: usize, row: &mut [f64]) {
        let st = self.strides;
        let base = &self.v[b * st[0] + n * st[1] + i * st[2]..][..self.width];
        let (given, padded) = row.split_at_mut(self.width);
        given.iter_mut().zip(base).for_each(|(x, m)| *x += m);
        padded.fill(f64::NEG_INFINITY);
    }
}

/// ONNX RotaryEmbedding: X (B, N, S, H) or (B, S, N·H) with `num_heads`, caches (positions, rot/2) read at
/// `position_ids`, or (B, S, rot/2) without them.
fn rotary(ctx: &mut Ctx) -> Result<Out> {
    let (Some(xs), Some(cs)) = (ctx.shape(0), ctx.shape(1)) else {
        return host("RotaryEmbedding: missing input");
    };
    let four = xs.len() == 4;
    let (s, heads, h) = match (xs.len(), ctx.attr_i("num_heads", 0).max(0) as usize) {
        (4, _) => (xs[2], xs[1], xs[3]),
        (3, n) if n > 0 && xs[2] % n == 0 => (xs[1], n, xs[2] / n),
        _ => return host(format!("RotaryEmbedding of X {xs:?}")),
    };
    let rot = match ctx.attr_i("rotary_embedding_dim", 0).max(0) as usize {
        0 => h,
        r => r,
    };
    let width = *cs.last().unwrap_or(&0);
    if rot % 2 != 0 || rot > h || rot / 2 > width || !ctx.is_float(1) || !ctx.is_float(2) {
        return host(format!(
            "RotaryEmbedding: rotary dim {rot} of heads of {h}, a cache {cs:?}"
        ));
    }
    let x = ctx.dev(0)?;
    let cos = ctx.dev(1)?;
    let sin = ctx.dev(2)?;
    let pid = match ctx.has(3) {
        true => Some(ctx.dev_words(3)?),
        false => None,
    };
    let out = ctx.output(xs.clone(), ctx.out_dtype());
    let n = out.len();
    let mut p = super::Params::new();
    p.set(0, n as u32)
        .set(1, s as u32)
        .set(2, heads as u32)
        .set(3, h as u32)
        .set(4, rot as u32)
        .set(5, width as u32)
        .set(6, ctx.attr_i("interleaved", 0) as u32)
        .set(7, pid.is_some() as u32)
        .set(8, four as u32);
    let pb = pid.as_deref().unwrap_or(&x.buf);
    let ins = [Some(&*x.buf), Some(&*cos.buf), Some(&*sin.buf), Some(pb)];
    if n > 0 {
        ctx.run("elementwise/rotary", "main", &p.0, &ins, &out, n)?;
    }
    super::done(ctx, out)
}
