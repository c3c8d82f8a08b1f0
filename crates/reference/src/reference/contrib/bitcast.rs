//! ONNX's `BitCast` (opset 26; tract has no kernel for it): reinterprets each element's bits as the type `to` of
//! the same width, as numpy's `view` does in ONNX's reference (onnx/reference/ops/op_bitcast.py).
//!
//! The reference holds floats as f64, so a float input's own ONNX type is not its tract type: the widened model
//! (`widen`) turns float32 and float16 into float64, and the fact then reads F64 for all three. The width is what
//! tells them apart, and BitCast requires it to be `to`'s: a float input is float16, float32 or float64 as `to` is
//! 16, 32 or 64 bits wide (bfloat16 is never widened, and tract cannot hold it). This reads the node alone, so it
//! holds wherever the node sits (a subgraph, a cut model); the model's declared types would say the same for a
//! graph input but not for a value the graph computes. An input tract holds narrow (the model parsed as it is)
//! is taken in its own type. The f64 value is rounded to that type first: exact for values that were of it (graph
//! inputs, initializers, values ONNX computes in that type and the reference reproduces), the nearest otherwise.
//! Float outputs are f64, as every contrib kernel gives them, holding the reinterpreted value exactly.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, values};

/// Claimed in any domain: tract lacks BitCast.
pub(super) const TABLE: &[Row] = &[Row::any_domain("BitCast", &BitCast)];

/// An ONNX element type BitCast can produce or read: its tract type (floats as the type the value has) and width.
fn onnx_type(code: i64) -> Option<(DatumType, usize)> {
    Some(match code {
        1 => (DatumType::F32, 32),
        2 => (DatumType::U8, 8),
        3 => (DatumType::I8, 8),
        4 => (DatumType::U16, 16),
        5 => (DatumType::I16, 16),
        6 => (DatumType::I32, 32),
        7 => (DatumType::I64, 64),
        9 => (DatumType::Bool, 8),
        10 => (DatumType::F16, 16),
        11 => (DatumType::F64, 64),
        12 => (DatumType::U32, 32),
        13 => (DatumType::U64, 64),
        _ => return None,
    })
}

/// The node's target type and width.
fn target(n: &Node) -> TractResult<(DatumType, usize)> {
    let to = n.req_int("to")?;
    onnx_type(to).ok_or_else(|| {
        anyhow::anyhow!(
            "BitCast `{}`: phantom cannot reinterpret as ONNX type {to}",
            n.proto.name
        )
    })
}

/// The input's own type: a float held as F64 is the float of `to`'s width; anything else is its tract type.
fn source(n: &Node, dt: DatumType, width: usize) -> TractResult<DatumType> {
    let own = match (dt, width) {
        (DatumType::F64, 16) => DatumType::F16,
        (DatumType::F64, 32) => DatumType::F32,
        (dt, _) => dt,
    };
    let bits = own.size_of() * 8;
    anyhow::ensure!(
        bits == width && own != DatumType::String,
        "BitCast `{}`: a {own:?} input ({bits} bits) cannot be reinterpreted as {width} bits",
        n.proto.name
    );
    Ok(own)
}

/// The bits of every element of `t`, read as type `own`.
fn bits(t: &Tensor, own: DatumType) -> TractResult<Vec<u64>> {
    Ok(match own {
        DatumType::F16 => (values::<f64>(t)?.iter())
            .map(|&v| half::f16::from_f64(v).to_bits() as u64)
            .collect(),
        DatumType::F32 => (values::<f64>(t)?.iter())
            .map(|&v| (v as f32).to_bits() as u64)
            .collect(),
        DatumType::F64 => (values::<f64>(t)?.iter()).map(|&v| v.to_bits()).collect(),
        DatumType::Bool => (values::<bool>(t)?.iter()).map(|&v| v as u64).collect(),
        DatumType::I8 => (values::<i8>(t)?.iter()).map(|&v| v as u8 as u64).collect(),
        DatumType::I16 => (values::<i16>(t)?.iter())
            .map(|&v| v as u16 as u64)
            .collect(),
        DatumType::I32 => (values::<i32>(t)?.iter())
            .map(|&v| v as u32 as u64)
            .collect(),
        DatumType::I64 => (values::<i64>(t)?.iter()).map(|&v| v as u64).collect(),
        _ => values::<u64>(t)?,
    })
}

/// Elements of type `to` from their bits, in `shape`; floats as f64.
fn from_bits(b: &[u64], to: DatumType, shape: &[usize]) -> TractResult<Tensor> {
    let f = |g: fn(u64) -> f64| {
        Tensor::from_shape(shape, &b.iter().map(|&v| g(v)).collect::<Vec<f64>>())
    };
    match to {
        DatumType::F16 => f(|v| half::f16::from_bits(v as u16).to_f64()),
        DatumType::F32 => f(|v| f32::from_bits(v as u32) as f64),
        DatumType::F64 => f(f64::from_bits),
        DatumType::Bool => {
            Tensor::from_shape(shape, &b.iter().map(|&v| v != 0).collect::<Vec<_>>())
        }
        DatumType::U8 => Tensor::from_shape(shape, &b.iter().map(|&v| v as u8).collect::<Vec<_>>()),
        DatumType::I8 => {
            Tensor::from_shape(shape, &b.iter().map(|&v| v as u8 as i8).collect::<Vec<_>>())
        }
        DatumType::U16 => {
            Tensor::from_shape(shape, &b.iter().map(|&v| v as u16).collect::<Vec<_>>())
        }
        DatumType::I16 => Tensor::from_shape(
            shape,
            &b.iter().map(|&v| v as u16 as i16).collect::<Vec<_>>(),
        ),
        DatumType::U32 => {
            Tensor::from_shape(shape, &b.iter().map(|&v| v as u32).collect::<Vec<_>>())
        }
        DatumType::I32 => Tensor::from_shape(
            shape,
            &b.iter().map(|&v| v as u32 as i32).collect::<Vec<_>>(),
        ),
        DatumType::U64 => Tensor::from_shape(shape, b),
        DatumType::I64 => {
            Tensor::from_shape(shape, &b.iter().map(|&v| v as i64).collect::<Vec<_>>())
        }
        other => anyhow::bail!("BitCast to {other:?} is not supported"),
    }
}

struct BitCast;

impl Kernel for BitCast {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let (to, width) = target(n)?;
        source(n, *dt, width)?;
        let out = if to.is_float() { DatumType::F64 } else { to };
        Ok(vec![(out, shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let (to, width) = target(n)?;
        let own = source(n, x.datum_type(), width)?;
        let b = bits(x, own)?;
        Ok(vec![from_bits(&b, to, x.shape()).map_err(|e| {
            anyhow::anyhow!("BitCast `{}`: {e}", n.proto.name)
        })?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_widened_float_is_read_at_the_width_of_to() {
        let x = Tensor::from_shape(&[2], &[1.0f64, -2.5]).unwrap();
        let own = source_of_test(DatumType::F64, 32);
        let b = bits(&x, own).unwrap();
        assert_eq!(b, [1.0f32.to_bits() as u64, (-2.5f32).to_bits() as u64]);
        let y = from_bits(&b, DatumType::I32, &[2]).unwrap();
        assert_eq!(
            values::<i32>(&y).unwrap(),
            [0x3f80_0000, (-2.5f32).to_bits() as i32]
        );
    }

    #[test]
    fn integers_reinterpret_their_twos_complement() {
        let x = Tensor::from_shape(&[2], &[-1i8, 5]).unwrap();
        let y = from_bits(&bits(&x, DatumType::I8).unwrap(), DatumType::U8, &[2]).unwrap();
        assert_eq!(values::<u8>(&y).unwrap(), [255, 5]);
        let h = from_bits(&[0x3c00], DatumType::F16, &[]).unwrap();
        assert_eq!(values::<f64>(&h).unwrap(), [1.0]);
    }

    fn source_of_test(dt: DatumType, width: usize) -> DatumType {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "BitCast".into(),
            ..Default::default()
        });
        source(&n, dt, width).unwrap()
    }

    #[test]
    fn widths_must_agree() {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "BitCast".into(),
            ..Default::default()
        });
        assert!(source(&n, DatumType::I32, 64).is_err());
        assert_eq!(source(&n, DatumType::F64, 16).unwrap(), DatumType::F16);
    }
}
