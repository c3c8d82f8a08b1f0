//! `MatMulNBits` with `accuracy_level = 4` as ONNX Runtime's CPU kernel computes it: A quantized to int8,
//! symmetrically, one scale `max|A| / 127` per block of `block_size` along K, rounded half to even, then multiplied
//! (the integer product is exact, so the quantized A times the dequantized weights in f64 is what the kernel
//! computes, to rounding). The model asks for that precision, so a rounding run of a target that honours it (the
//! expected noise) computes it too; the reference itself stays exact.

use tract_onnx::prelude::*;

use super::super::contrib::op::ContribOp;
use super::Evaluator;

impl Evaluator<'_, '_> {
    /// Computes `MatMulNBits` at `accuracy_level = 4` as ONNX Runtime's CPU kernel does (rounding runs).
    pub fn with_int8_activations(mut self, on: bool) -> Self {
        self.int8_a = on;
        self
    }
}

/// `ins[0]` quantized as the kernel does, where `node` is a `MatMulNBits` at `accuracy_level = 4`.
pub(super) fn quantize_a(node: &TypedNode, ins: &mut TVec<TValue>) -> TractResult<()> {
    let Some(c) = node.op_as::<ContribOp>() else {
        return Ok(());
    };
    let n = &c.node;
    if n.op() != "MatMulNBits" || n.int("accuracy_level", 0) != 4 {
        return Ok(());
    }
    let (k, block) = (
        n.int("K", 0).max(0) as usize,
        n.int("block_size", 0).max(1) as usize,
    );
    let Some(a) = ins.first().filter(|a| a.datum_type() == f64::datum_type()) else {
        return Ok(());
    };
    let mut t = a.clone().into_tensor();
    let mut view = t.to_plain_array_view_mut::<f64>()?;
    let Some(v) = view.as_slice_mut().filter(|v| k > 0 && v.len() % k == 0) else {
        return Ok(());
    };
    for row in v.chunks_mut(k) {
        row.chunks_mut(block).for_each(quantize_block);
    }
    ins[0] = t.into_tvalue();
    Ok(())
}

/// One block onto int8 levels of its own scale.
fn quantize_block(b: &mut [f64]) {
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())) / 127.0;
    if scale > 0.0 {
        b.iter_mut()
            .for_each(|v| *v = (*v / scale).round_ties_even().clamp(-127.0, 127.0) * scale);
    }
}

#[cfg(test)]
mod tests {
    use super::quantize_block;

    #[test]
    fn a_block_s_largest_value_is_exact_and_the_rest_round_to_its_127ths() {
        let mut b = [1.27, 0.5, -0.004, 0.0];
        quantize_block(&mut b);
        assert_eq!(b, [1.27, 0.5, 0.0, 0.0]);
    }
}
