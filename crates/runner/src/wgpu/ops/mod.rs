//! The ops phantom has shaders for, by ONNX op type, and the shape arithmetic they share (broadcasting, strides,
//! parameter blocks). Each family lives in its own file and lists its ops in one table of [`Row`]s, which
//! [`FAMILIES`] gathers; an op returns [`Out::Host`] with a reason for a form it does not cover, and the node then
//! runs on the host.

mod attention;
mod compare;
mod contrib;
mod elementwise;
mod layout;
mod linalg;
mod loss;
mod norm;
mod pad;
mod pool;
mod quant;
mod reduce;
mod resize;
mod scatter;
pub mod split;

use super::ctx::{Ctx, DevVal, Out};
use crate::error::Result;
use crate::tensor::DType;

pub use layout::reshaped;

/// The shader path of one op: runs the node in `ctx`, or returns [`Out::Host`] with a reason for a form it does
/// not cover.
pub type OpFn = fn(&mut Ctx) -> Result<Out>;

/// One op with a shader path, a row of its family's `TABLE`: adding an op is one row.
struct Row {
    /// The ONNX op type.
    op: &'static str,
    /// Its implementation.
    run: OpFn,
    /// The op's domain: the default one, `ai.onnx.ml` (Binarizer) or ONNX Runtime's `com.microsoft` ([`contrib`]).
    domain: &'static str,
}

impl Row {
    /// `op` of the default ONNX domain.
    const fn new(op: &'static str, run: OpFn) -> Row {
        Row {
            op,
            run,
            domain: "ai.onnx",
        }
    }

    /// `op` of ONNX Runtime's contrib domain (`com.microsoft`).
    const fn ms(op: &'static str, run: OpFn) -> Row {
        Row {
            op,
            run,
            domain: "com.microsoft",
        }
    }

    /// `op` of the classic-ML domain (`ai.onnx.ml`).
    const fn ml(op: &'static str, run: OpFn) -> Row {
        Row {
            op,
            run,
            domain: "ai.onnx.ml",
        }
    }
}

/// Every family's table, in the order [`find`] tries them (no op is in two).
const FAMILIES: &[&[Row]] = &[
    elementwise::TABLE,
    compare::TABLE,
    attention::TABLE,
    loss::TABLE,
    scatter::TABLE,
    layout::TABLE,
    pad::TABLE,
    linalg::TABLE,
    pool::TABLE,
    quant::TABLE,
    reduce::TABLE,
    norm::TABLE,
    contrib::TABLE,
];

/// Every op with a shader path.
fn rows() -> impl Iterator<Item = &'static Row> {
    FAMILIES.iter().flat_map(|family| family.iter())
}

/// The most dims a strided shader walks.
pub const MAX_RANK: usize = 8;

/// The implementation of `op`, if phantom has a shader for it.
pub fn find(op: &str) -> Option<OpFn> {
    rows().find(|r| r.op == op).map(|r| r.run)
}

/// The domain of the op type `op` that phantom's shader implements (the default domain for an op without one).
pub fn domain_of(op: &str) -> &'static str {
    rows().find(|r| r.op == op).map_or("ai.onnx", |r| r.domain)
}

/// Every op type with a shader path (for `phantom devices --ops` and the README).
pub fn covered() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = rows().map(|r| r.op).collect();
    v.sort();
    v
}

/// Row-major strides of `shape`.
pub fn contiguous(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d] as i64;
    }
    s
}

/// NumPy broadcast of several shapes; `None` when they do not broadcast.
pub fn broadcast(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// Strides that read a tensor of `shape` broadcast to `out` (0 along broadcast dims).
pub fn bcast_strides(shape: &[usize], out: &[usize]) -> Vec<i64> {
    let own = contiguous(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|d| match d.checked_sub(lead) {
            Some(k) if shape[k] != 1 => own[k],
            _ => 0,
        })
        .collect()
}

/// A parameter block under construction.
#[derive(Default)]
pub struct Params(pub Vec<u32>);

impl Params {
    pub fn new() -> Params {
        Params(vec![0; 4])
    }
    pub fn set(&mut self, i: usize, v: u32) -> &mut Self {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = v;
        self
    }
    pub fn set_i(&mut self, i: usize, v: i64) -> &mut Self {
        self.set(i, v as i32 as u32)
    }
    pub fn set_f(&mut self, i: usize, v: f32) -> &mut Self {
        self.set(i, v.to_bits())
    }
    /// Writes `v` from slot `at` on (at most [`MAX_RANK`] entries).
    pub fn dims(&mut self, at: usize, v: &[usize]) -> &mut Self {
        for (k, &d) in v.iter().enumerate() {
            self.set(at + k, d as u32);
        }
        self
    }
    pub fn strides(&mut self, at: usize, v: &[i64]) -> &mut Self {
        for (k, &d) in v.iter().enumerate() {
            self.set_i(at + k, d);
        }
        self
    }
}

/// Fits in a 32-bit index and the strided shaders' rank.
pub fn fits(shape: &[usize]) -> bool {
    shape.len() <= MAX_RANK && shape.iter().product::<usize>() < (1 << 31)
}

/// A value of `dtype` narrower than the device's f32 storage (an f16 tensor in an f32 model) is rounded to it.
pub fn finish(ctx: &mut Ctx, v: DevVal) -> Result<DevVal> {
    let code = match (ctx.gpu.mode.is_f16(), v.dtype) {
        (false, DType::F16) => 18,
        (false, DType::Bf16) => 19,
        _ => return Ok(v),
    };
    let out = ctx.output(v.shape.clone(), v.dtype);
    let n = v.len();
    let mut p = Params::new();
    p.set(0, n as u32).set(1, code);
    ctx.run("elementwise/unary", "main", &p.0, &[Some(&v.buf)], &out, n)?;
    Ok(out)
}

/// The one output, finished, as an [`Out`].
pub fn done(ctx: &mut Ctx, v: DevVal) -> Result<Out> {
    Ok(Out::Dev(vec![finish(ctx, v)?]))
}

/// An op form without a shader path: the node runs on the host.
pub fn host(why: impl Into<String>) -> Result<Out> {
    Ok(Out::Host(why.into()))
}

/// Normalizes a possibly negative axis.
pub fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    (0..r.max(1)).contains(&v).then_some(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_in_one_row() {
        let ops = covered();
        assert!(ops.windows(2).all(|w| w[0] != w[1]), "an op is in two rows");
        assert!(ops.iter().all(|op| find(op).is_some()));
        assert!(find("LSTM").is_none());
    }

    #[test]
    fn rows_say_the_domain() {
        assert_eq!(domain_of("Binarizer"), "ai.onnx.ml");
        assert_eq!(domain_of("Add"), "ai.onnx");
        assert_eq!(domain_of("SkipLayerNormalization"), "com.microsoft");
        assert_eq!(domain_of("LSTM"), "ai.onnx");
    }
}
