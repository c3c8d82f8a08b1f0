//! ONNX's `BitShift` on integers of every width and signedness, X shifted by Y (numpy broadcasting), as BitShift-28
//! defines it: a right shift of a signed X is arithmetic; a left shift discards the bits it moves past the top
//! (the sign bit included); a shift amount that is negative or at least the type's width gives what the sign fill
//! alone gives, −1 for a right shift of a negative X and 0 otherwise (ONNX's reference, op_bitshift.py).
//!
//! tract shifts with Rust's `<<`/`>>`, which panics on such amounts in a debug build and masks them in a release
//! one (giving neither 0 nor −1), so phantom computes every BitShift. Integers keep their type, exactly.

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::broadcast::multi_broadcast;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, opt, string};

/// Claimed in any domain: tract gets out-of-range amounts wrong.
pub(super) const TABLE: &[Row] = &[Row::any_domain("BitShift", &BitShift)];

/// `x` shifted by `y` in a type of `bits` bits (signed or not), held in an i128 whose low `bits` bits are the
/// result (the caller truncates).
fn shift(x: i128, y: i128, bits: u32, left: bool) -> i128 {
    if y < 0 || y >= bits as i128 {
        return if !left && x < 0 { -1 } else { 0 };
    }
    match left {
        true => x << y,
        false => x >> y,
    }
}

/// Whether the node shifts left, from its required `direction`.
fn left(n: &Node) -> TractResult<bool> {
    match string(n, "direction", "").as_str() {
        "LEFT" => Ok(true),
        "RIGHT" => Ok(false),
        other => anyhow::bail!(
            "{INVALID}BitShift `{}`: direction `{other}` is not LEFT or RIGHT",
            n.proto.name
        ),
    }
}

/// X shifted by Y, both of Rust type `$t`, broadcast to `$shape`.
macro_rules! shifted {
    ($t:ty, $x:expr, $y:expr, $left:expr, $shape:expr) => {{
        let (xs, ys) = (
            $x.to_plain_array_view::<$t>()?,
            $y.to_plain_array_view::<$t>()?,
        );
        let shape = IxDyn($shape);
        let (xb, yb) = match (xs.broadcast(shape.clone()), ys.broadcast(shape.clone())) {
            (Some(a), Some(b)) => (a, b),
            _ => anyhow::bail!("BitShift: X and Y do not broadcast to {:?}", $shape),
        };
        let out: Vec<$t> = (xb.iter().zip(yb.iter()))
            .map(|(&a, &b)| shift(a as i128, b as i128, <$t>::BITS, $left) as $t)
            .collect();
        ArrayD::from_shape_vec(shape, out)?.into_tensor()
    }};
}

/// The output's type (X's, which Y shares) and shape.
fn out_fact(n: &Node, x: &Fact, y: &Fact) -> TractResult<Fact> {
    let name = &n.proto.name;
    anyhow::ensure!(
        x.0 == y.0 && x.0.is_integer(),
        "{INVALID}BitShift `{name}`: X of {:?} and Y of {:?}, not one integer type",
        x.0,
        y.0
    );
    let shape = multi_broadcast(&[&x.1, &y.1])
        .map_err(|e| anyhow::anyhow!("{INVALID}BitShift `{name}`: {e}"))?;
    Ok((x.0, shape.to_vec()))
}

struct BitShift;

impl Kernel for BitShift {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        left(n)?;
        Ok(vec![out_fact(n, fact(n, ins, 0)?, fact(n, ins, 1)?)?])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (x, y) = (opt(n, ins, 0)?, opt(n, ins, 1)?);
        let fx = (x.datum_type(), x.shape().to_vec());
        let (dt, shape) = out_fact(n, &fx, &(y.datum_type(), y.shape().to_vec()))?;
        let l = left(n)?;
        let out = match dt {
            DatumType::U8 => shifted!(u8, x, y, l, &shape),
            DatumType::U16 => shifted!(u16, x, y, l, &shape),
            DatumType::U32 => shifted!(u32, x, y, l, &shape),
            DatumType::U64 => shifted!(u64, x, y, l, &shape),
            DatumType::I8 => shifted!(i8, x, y, l, &shape),
            DatumType::I16 => shifted!(i16, x, y, l, &shape),
            DatumType::I32 => shifted!(i32, x, y, l, &shape),
            DatumType::I64 => shifted!(i64, x, y, l, &shape),
            other => anyhow::bail!(
                "{INVALID}BitShift `{}`: cannot shift {other:?}",
                n.proto.name
            ),
        };
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::super::util::values;
    use super::*;

    fn run<T: Datum + Copy>(direction: &str, x: &[T], y: &[T]) -> Vec<T> {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "BitShift".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "direction".into(),
                s: direction.as_bytes().to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let (x, y) = (tensor1(x), tensor1(y));
        let z = BitShift.eval(&n, &[Some(&x), Some(&y)]).unwrap();
        values::<T>(&z[0]).unwrap()
    }

    #[test]
    fn out_of_range_amounts_give_the_sign_fill() {
        assert_eq!(run::<i8>("RIGHT", &[-8, 4, -1], &[8, 9, 127]), [-1, 0, -1]);
        assert_eq!(
            run::<i8>("RIGHT", &[-8, 4, -1], &[-1, -8, -16]),
            [-1, 0, -1]
        );
        assert_eq!(run::<i32>("LEFT", &[-8, 4, -1], &[32, 33, -1]), [0, 0, 0]);
        assert_eq!(run::<u64>("LEFT", &[1], &[64]), [0]);
    }

    #[test]
    fn in_range_shifts_wrap_and_sign_extend() {
        assert_eq!(
            run::<i8>("LEFT", &[64, 1, -64], &[1, 7, 1]),
            [-128, -128, -128]
        );
        assert_eq!(run::<i8>("RIGHT", &[-128], &[7]), [-1]);
        assert_eq!(run::<u8>("RIGHT", &[255, 16], &[7, 2]), [1, 4]);
        assert_eq!(run::<u64>("LEFT", &[u64::MAX], &[63]), [1 << 63]);
        assert_eq!(run::<u32>("LEFT", &[3], &[1]), [6]);
    }
}
