//! Another faithful execution of a quantized graph: every `QuantizeLinear` rounds the elements whose input lies
//! within a few roundings of a boundary to the other neighbour. ONNX Runtime computes a QDQ graph either in float
//! (unfused: dequantize, op, quantize) or in integers (fused QLinearConv, QGemm, QLinearAdd… requantizing with their
//! own multipliers); the two land on different levels exactly where a level's input lies that close to a boundary,
//! and each such move propagates downstream. A run that flips every such near-tie shows how far a faithful
//! execution may carry a graph output from the correctly rounded one: the variation a verdict must allow the outputs
//! of a run whose intermediates it could not see.

use tract_onnx::prelude::*;

use super::{f64s, moved, radius, shaped_like};

/// The key of a run's details that counts the elements a run with [`Ties`] moved.
pub const TIES_FLIPPED: &str = "ties flipped";

/// The window within which a quantization's input counts as a near-tie: `atol + rtol · max(|x|, RMS of x)`, the
/// same fixed window the target's decisions are adopted in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ties {
    pub atol: f64,
    pub rtol: f64,
}

/// Rounds `out[0]` (a quantization of `ins[0]`) to the other neighbour at every element whose input, moved by the
/// window one way, quantizes to an adjacent level (and moved the other way stays put); `run` evaluates the node on
/// moved inputs. Returns how many elements moved.
pub fn flip(
    t: Ties,
    ins: &TVec<TValue>,
    out: &mut TVec<TValue>,
    mut run: impl FnMut(TVec<TValue>) -> TractResult<TVec<TValue>>,
) -> u64 {
    let Some(x0) = ins.first().filter(|v| v.datum_type() == f64::datum_type()) else {
        return 0;
    };
    let (Some(x), Some(ours)) = (f64s(x0), out.first().and_then(f64s)) else {
        return 0;
    };
    if ours.len() != x.len() {
        return 0;
    }
    let r = radius(&x, t.atol, t.rtol);
    let mut at = |sign: f64| {
        let mut moved_ins = ins.clone();
        moved_ins[0] = shaped_like(x0, moved(&x, &r, 1.0, sign)).ok()?;
        f64s(run(moved_ins).ok()?.first()?)
    };
    let (Some(down), Some(up)) = (at(-1.0), at(1.0)) else {
        return 0;
    };
    let (flipped, n) = others(&ours, &down, &up);
    if n > 0 {
        if let Ok(v) = shaped_like(&out[0], flipped) {
            out[0] = v;
            return n;
        }
    }
    0
}

/// Each element's other neighbour where exactly one of the moved inputs reaches it, one level away; the element as
/// it is elsewhere (on no boundary, or a window that spans more than one step). With how many moved.
fn others(ours: &[f64], down: &[f64], up: &[f64]) -> (Vec<f64>, u64) {
    let mut n = 0;
    let v = (ours.iter().zip(down).zip(up))
        .map(|((&o, &d), &u)| {
            let other = match (d != o, u != o) {
                (true, false) => d,
                (false, true) => u,
                _ => return o,
            };
            if (other - o).abs() <= 1.0 && other.is_finite() {
                n += 1;
                other
            } else {
                o
            }
        })
        .collect();
    (v, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_near_tie_moves_and_only_by_one_level() {
        // Levels 3 (input 3.4999, a near-tie up), 5 (5.2: none), 7 (window spans two steps), 2 (2.5001: down).
        let ours = [3.0, 5.0, 7.0, 2.0];
        let down = [3.0, 5.0, 6.0, 1.0];
        let up = [4.0, 5.0, 8.0, 2.0];
        let (v, n) = others(&ours, &down, &up);
        assert_eq!(v, vec![4.0, 5.0, 7.0, 1.0]);
        assert_eq!(n, 2);
    }
}
