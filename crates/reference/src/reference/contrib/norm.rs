//! The fused normalizations: SkipLayerNormalization, SkipSimplifiedLayerNormalization (`com.microsoft`) and
//! SimplifiedLayerNormalization (which ORT registers in the ONNX domain) and ONNX's RMSNormalization, all with the
//! two-pass variance; and ONNX's LayerNormalization where tract cannot type it.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{check_len, f64s, f64s_opt, fact, float_type, shaped, RowNorm};

/// The normalizations. SimplifiedLayerNormalization is claimed in any domain, as ORT registers it in the ONNX
/// domain (which does not define it); so is ONNX's RMSNormalization (opset 23, ORT's
/// SimplifiedLayerNormalization), whose squares tract sums in f32. LayerNormalization is claimed where tract
/// cannot type it ([`claims_layer_norm`]).
pub(super) const TABLE: &[Row] = &[
    Row::new("SkipLayerNormalization", &Skip),
    Row::new("SkipSimplifiedLayerNormalization", &Skip),
    Row::any_domain("SimplifiedLayerNormalization", &Layer { simplified: true }),
    Row::any_domain("RMSNormalization", &Layer { simplified: true }),
    Row::new("LayerNormalization", &Layer { simplified: false }),
];

/// SkipLayerNormalization and its simplified (RMS) form: sum = input + skip (+ bias), then the normalized sum.
/// Outputs: output, mean and inv_std_var ([…, 1]; ORT's CPU kernel leaves them unwritten), and the sum.
///
/// SkipSimplifiedLayerNormalization has no beta: its fourth input (slot 3) is the bias, and ORT 1.31's CPU kernel
/// adds it (checked: sum = input + skip + bias). SkipLayerNormalization's bias is slot 4, after beta.
struct Skip;

impl Kernel for Skip {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        let mut stat = x.1.clone();
        if let Some(last) = stat.last_mut() {
            *last = 1;
        }
        Ok(vec![
            (dt, x.1.clone()),
            (dt, stat.clone()),
            (dt, stat),
            (dt, x.1.clone()),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let simplified = n.op() == "SkipSimplifiedLayerNormalization";
        let x = f64s(n, ins, 0)?;
        let skip = f64s(n, ins, 1)?;
        let gamma = f64s(n, ins, 2)?;
        let (beta, bias) = if simplified {
            (None, f64s_opt(ins, 3)?)
        } else {
            (f64s_opt(ins, 3)?, f64s_opt(ins, 4)?)
        };
        let shape = x.shape().to_vec();
        let h = *shape
            .last()
            .ok_or_else(|| anyhow::anyhow!("{} of a scalar", n.op()))?;
        check_len(&gamma, h, "gamma")?;
        for (v, what) in [(&beta, "beta"), (&bias, "bias")] {
            if let Some(v) = v {
                check_len(v, h, what)?;
            }
        }
        let skip = skip.iter().copied().collect::<Vec<f64>>();
        anyhow::ensure!(
            !skip.is_empty() && x.len() % skip.len() == 0 && skip.len() % h.max(1) == 0,
            "skip has {} elements, which do not tile the input's {}",
            skip.len(),
            x.len()
        );
        let mut sum: Vec<f64> = x.iter().copied().collect();
        for (i, s) in sum.iter_mut().enumerate() {
            *s += skip[i % skip.len()] + bias.as_ref().map_or(0.0, |b| b[i % h.max(1)]);
        }
        let norm = RowNorm {
            gamma: gamma.as_slice().expect("owned arrays are standard"),
            beta: beta.as_ref().map(|b| b.as_slice().expect("standard")),
            epsilon: n.float("epsilon", 1e-12),
            simplified,
        };
        let mut out = sum.clone();
        let (mut means, mut invs) = (vec![], vec![]);
        for row in out.chunks_mut(h.max(1)) {
            let (m, inv) = norm.apply(row);
            means.push(m);
            invs.push(inv);
        }
        let mut stat = shape.clone();
        if let Some(last) = stat.last_mut() {
            *last = 1;
        }
        Ok(vec![
            shaped(&shape, out)?,
            shaped(&stat, means)?,
            shaped(&stat, invs)?,
            shaped(&shape, sum)?,
        ])
    }
}

/// LayerNormalization (ONNX) and SimplifiedLayerNormalization (RMS norm, ORT's): y = (x − μ) / √(σ² + ε) · scale
/// (+ bias) over the axes from `axis` on, μ = 0 for the simplified form. Outputs: Y, then the statistics with the
/// normalized axes kept at extent 1: Mean and InvStdDev for LayerNormalization, inv_std_var for the simplified form.
///
/// phantom evaluates ONNX's LayerNormalization itself only where tract cannot: tract's shape rules count up to an
/// axis below −rank as an unsigned number and never finish, so a node whose axis is negative and not −1 is
/// phantom's, which refuses an axis outside the input's rank ([`claims_layer_norm`]).
struct Layer {
    simplified: bool,
}

fn split_axis(n: &Node, rank: usize) -> TractResult<usize> {
    let axis = n.int("axis", -1);
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    anyhow::ensure!(
        (0..rank as i64).contains(&a),
        "{}axis {axis} out of range for rank {rank}",
        super::kernel::INVALID
    );
    Ok(a as usize)
}

/// The statistics' shape: the normalized axes (from `axis` on) kept at extent 1.
fn stat_shape(shape: &[usize], axis: usize) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < axis { d } else { 1 })
        .collect()
}

/// Input `slot` broadcast to the normalized axes, row-major.
fn per_row(
    n: &Node,
    ins: &[Option<&Tensor>],
    slot: usize,
    axes: &[usize],
) -> TractResult<Option<Vec<f64>>> {
    let Some(v) = f64s_opt(ins, slot)? else {
        return Ok(None);
    };
    let b = v.broadcast(axes).ok_or_else(|| {
        anyhow::anyhow!(
            "{} input {slot} of shape {:?} does not broadcast to {:?}",
            n.op(),
            v.shape(),
            axes
        )
    })?;
    Ok(Some(b.iter().copied().collect()))
}

impl Kernel for Layer {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        let stat = stat_shape(&x.1, split_axis(n, x.1.len())?);
        let mut out = vec![(dt, x.1.clone()), (dt, stat.clone())];
        if !self.simplified {
            out.push((dt, stat));
        }
        Ok(out)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let shape = x.shape().to_vec();
        let axis = split_axis(n, shape.len())?;
        let h: usize = shape[axis..].iter().product();
        let scale = per_row(n, ins, 1, &shape[axis..])?
            .ok_or_else(|| anyhow::anyhow!("{} has no scale input", n.op()))?;
        let bias = match self.simplified {
            true => None,
            false => per_row(n, ins, 2, &shape[axis..])?,
        };
        let norm = RowNorm {
            gamma: &scale,
            beta: bias.as_deref(),
            epsilon: n.float("epsilon", 1e-5),
            simplified: self.simplified,
        };
        let mut out: Vec<f64> = x.iter().copied().collect();
        let (mut means, mut invs) = (vec![], vec![]);
        for row in out.chunks_mut(h.max(1)) {
            let (m, inv) = norm.apply(row);
            means.push(m);
            invs.push(inv);
        }
        let stat = stat_shape(&shape, axis);
        Ok(match self.simplified {
            true => vec![shaped(&shape, out)?, shaped(&stat, invs)?],
            false => vec![
                shaped(&shape, out)?,
                shaped(&stat, means)?,
                shaped(&stat, invs)?,
            ],
        })
    }
}

/// Whether phantom evaluates this ONNX LayerNormalization rather than tract: when its axis is negative and not −1
/// (tract's rules would loop past an axis below −rank; see [`Layer`]).
pub fn claims_layer_norm(n: &tract_onnx::pb::NodeProto) -> bool {
    let axis = n
        .attribute
        .iter()
        .find(|a| a.name == "axis")
        .map_or(-1, |a| a.i);
    n.op_type == "LayerNormalization" && (n.domain.is_empty() || n.domain == "ai.onnx") && axis < -1
}
