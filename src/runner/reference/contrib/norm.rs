//! The fused normalizations: SkipLayerNormalization, SkipSimplifiedLayerNormalization (`com.microsoft`) and
//! SimplifiedLayerNormalization (which ORT registers in the ONNX domain), all with the two-pass variance.

use tract_onnx::prelude::*;

use super::util::{check_len, f64s, f64s_opt, fact, float_type, shaped, RowNorm};
use super::{Fact, Kernel, Node};

pub const OPS: &[&str] = &[
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization",
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

/// SimplifiedLayerNormalization (RMS norm): y = x / √(mean(x²) + ε) · scale over the axes from `axis` on.
/// Outputs: Y and inv_std_var (the normalized axes kept at extent 1).
struct Simplified;

fn split_axis(n: &Node, rank: usize) -> TractResult<usize> {
    let axis = n.int("axis", -1);
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    anyhow::ensure!(
        (0..rank as i64).contains(&a),
        "axis {axis} out of range for rank {rank}"
    );
    Ok(a as usize)
}

impl Kernel for Simplified {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        let axis = split_axis(n, x.1.len())?;
        let stat: Vec<usize> =
            x.1.iter()
                .enumerate()
                .map(|(i, &d)| if i < axis { d } else { 1 })
                .collect();
        Ok(vec![(dt, x.1.clone()), (dt, stat)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let scale = f64s(n, ins, 1)?;
        let shape = x.shape().to_vec();
        let axis = split_axis(n, shape.len())?;
        let h: usize = shape[axis..].iter().product();
        let scale = scale
            .broadcast(&shape[axis..])
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "scale of shape {:?} does not broadcast to {:?}",
                    scale.shape(),
                    &shape[axis..]
                )
            })?
            .iter()
            .copied()
            .collect::<Vec<f64>>();
        let norm = RowNorm {
            gamma: &scale,
            beta: None,
            epsilon: n.float("epsilon", 1e-5),
            simplified: true,
        };
        let mut out: Vec<f64> = x.iter().copied().collect();
        let invs: Vec<f64> = out
            .chunks_mut(h.max(1))
            .map(|row| norm.apply(row).1)
            .collect();
        let stat: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if i < axis { d } else { 1 })
            .collect();
        Ok(vec![shaped(&shape, out)?, shaped(&stat, invs)?])
    }
}

pub fn kernel(op: &str) -> Option<&'static dyn Kernel> {
    match op {
        "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization" => Some(&Skip),
        "SimplifiedLayerNormalization" => Some(&Simplified),
        _ => None,
    }
}
