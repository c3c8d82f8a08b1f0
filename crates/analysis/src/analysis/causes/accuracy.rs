//! ONNX Runtime's `MatMulNBits` with `accuracy_level = 4`: on CPU the kernel quantizes its activations A to int8
//! (symmetric, one scale `max|A| / 127` per block of `block_size` along K, round half to even) and multiplies
//! integers. That is a documented precision mode, not a fault, and it cannot be turned off without changing the
//! model, so it is named from the attribute, with the numbers: the reference's A quantized that way, times the
//! reference's dequantized weights, moves Y by as much as the node's error. Claimed only when that quantization
//! alone accounts for the error observed (at least half of it, at most twice).

use super::{cause, num, Evidence, Site};
use crate::report::model::{Cause, CauseKind, Confidence, Culprit};

/// The most rows of A the error of quantizing them is computed for (all N outputs each).
const MAX_ROWS: usize = 64;

pub(super) fn explain(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    if s.op != "MatMulNBits" || ev.attr_i(s.i, "accuracy_level") != Some(4) {
        return;
    }
    let Some(moved) = quantized_error(ev, s) else {
        return;
    };
    let observed = c.max_abs;
    let ratio = moved / observed.max(f64::MIN_POSITIVE);
    if !(0.5..=2.0).contains(&ratio) {
        return;
    }
    let block = ev.attr_i(s.i, "block_size").unwrap_or(0);
    out.push(cause(
        CauseKind::AccuracyLevel,
        format!(
            "accuracy_level 4: ONNX Runtime quantizes A to int8 per block of {block} (scale max|A|/127); that \
             quantization alone moves Y by up to {} (the node's error is {}, {:.2}× of it)",
            num(moved),
            num(observed),
            ratio
        ),
        &[
            ("int8_activation_error", moved),
            ("observed_max_abs", observed),
            ("ratio", ratio),
        ],
        Confidence::High,
        "accuracy_level 4 trades precision for speed by design: set accuracy_level to 0 or 1 (float activations) \
         where this error matters"
            .into(),
    ));
}

/// The largest |ΔY| that quantizing the reference's A to int8 per block makes, over up to [`MAX_ROWS`] rows.
fn quantized_error(ev: &Evidence, s: &Site) -> Option<f64> {
    let k = usize::try_from(ev.attr_i(s.i, "K")?).ok()?;
    let n = usize::try_from(ev.attr_i(s.i, "N")?).ok()?;
    let block = usize::try_from(ev.attr_i(s.i, "block_size")?).ok()?.max(1);
    let a = ev.value(s.node.inputs.first()?)?;
    let a = a.as_slice()?.to_vec();
    if k == 0 || a.len() % k != 0 {
        return None;
    }
    let w = weight(ev, s, k, n)?;
    let mut worst = 0f64;
    for row in a.chunks(k).take(MAX_ROWS) {
        let delta = quantization_delta(row, block);
        for wn in w.chunks(k).take(n) {
            let dy: f64 = delta.iter().zip(wn).map(|(d, w)| d * w).sum();
            worst = worst.max(dy.abs());
        }
    }
    Some(worst)
}

/// The node's [N, K] weight dequantized from its initializers (`phantom_precision::nbits`).
fn weight(ev: &Evidence, s: &Site, k: usize, n: usize) -> Option<Vec<f64>> {
    use phantom_precision::nbits::{Packed, ZeroPoints};
    let init = |slot: usize| {
        let name = s.node.inputs.get(slot).filter(|x| !x.is_empty())?;
        ev.initializers.get(name)
    };
    let values = |slot: usize| {
        Some(
            init(slot)?
                .to_f64_array()
                .iter()
                .copied()
                .collect::<Vec<f64>>(),
        )
    };
    let bytes = |slot: usize| Some(values(slot)?.iter().map(|&v| v as u8).collect::<Vec<u8>>());
    let b = bytes(1)?;
    let scales = values(2)?;
    let (float_zp, packed_zp) = match init(3) {
        Some(t) if t.dtype().is_float() => (values(3), None),
        Some(_) => (None, bytes(3)),
        None => (None, None),
    };
    let zero_points = match (&float_zp, &packed_zp) {
        (Some(z), _) => ZeroPoints::Float(z),
        (_, Some(z)) => ZeroPoints::Packed(z),
        _ => ZeroPoints::Default,
    };
    let g_idx: Option<Vec<i64>> = values(4).map(|g| g.iter().map(|&v| v as i64).collect());
    let packed = Packed {
        k,
        n,
        bits: usize::try_from(ev.attr_i(s.i, "bits").unwrap_or(4)).ok()?,
        block: usize::try_from(ev.attr_i(s.i, "block_size")?).ok()?,
        b: &b,
        scales: &scales,
        zero_points,
        g_idx: g_idx.as_deref(),
    };
    packed.dequantize().ok()
}

/// `q(x) − x` for one row of A quantized to int8 symmetrically per block.
fn quantization_delta(row: &[f64], block: usize) -> Vec<f64> {
    row.chunks(block)
        .flat_map(|b| {
            let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())) / 127.0;
            b.iter().map(move |&v| match scale > 0.0 {
                true => (v / scale).round_ties_even().clamp(-127.0, 127.0) * scale - v,
                false => 0.0,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_s_largest_value_is_exact_and_the_rest_round_to_its_127ths() {
        let d = quantization_delta(&[1.27, 0.5, -0.004, 0.0], 4);
        assert_eq!(d[0], 0.0);
        assert!((d[1] - (0.5 - 0.5)).abs() < 1e-12);
        assert!((d[2] - 0.004).abs() < 1e-12, "{d:?}");
    }
}
