//! A spilled value's raw elements: written in native byte order at an offset of the store's one file, read back
//! by type and shape (positional reads and writes, so readers on several threads need no lock).

use half::slice::HalfFloatSliceExt;
use ndarray::ArrayD;

use crate::tensor::{DType, Tensor};

/// Writes the elements of `t` in native byte order at `offset` of `f`.
pub(super) fn write_elements(f: &std::fs::File, offset: u64, t: &Tensor) -> std::io::Result<()> {
    macro_rules! raw {
        ($a:expr) => {{
            let a = $a.as_standard_layout();
            write_at(
                f,
                bytemuck::cast_slice(a.as_slice().expect("standard layout")),
                offset,
            )
        }};
    }
    match t {
        Tensor::F64(a) => raw!(a),
        Tensor::F32(a) => raw!(a),
        Tensor::F16(a) => {
            let a = a.as_standard_layout();
            let bits: &[u16] = a.as_slice().expect("standard layout").reinterpret_cast();
            write_at(f, bytemuck::cast_slice(bits), offset)
        }
        Tensor::Bf16(a) => {
            let a = a.as_standard_layout();
            let bits: &[u16] = a.as_slice().expect("standard layout").reinterpret_cast();
            write_at(f, bytemuck::cast_slice(bits), offset)
        }
        Tensor::I64(a) => raw!(a),
        Tensor::I32(a) => raw!(a),
        Tensor::I16(a) => raw!(a),
        Tensor::I8(a) => raw!(a),
        Tensor::U64(a) => raw!(a),
        Tensor::U32(a) => raw!(a),
        Tensor::U16(a) => raw!(a),
        Tensor::U8(a) => raw!(a),
        Tensor::Bool(a) => {
            let bytes = a.mapv(u8::from);
            raw!(bytes)
        }
        Tensor::Str(_) => Err(std::io::Error::other("string values are not spilled")),
    }
}

/// Reads `shape`'s elements of `dtype` at `offset` of `f`, written by [`write_elements`].
pub(super) fn read_elements(
    f: &std::fs::File,
    offset: u64,
    dtype: DType,
    shape: &[usize],
) -> std::io::Result<Tensor> {
    let n: usize = shape.iter().product();
    macro_rules! read {
        ($t:ty) => {{
            let mut v: Vec<$t> = vec![<$t>::default(); n];
            read_at(f, bytemuck::cast_slice_mut(&mut v), offset)?;
            ArrayD::from_shape_vec(shape.to_vec(), v).map_err(std::io::Error::other)?
        }};
    }
    Ok(match dtype {
        DType::F64 => Tensor::F64(read!(f64)),
        DType::F32 => Tensor::F32(read!(f32)),
        DType::F16 => Tensor::F16(read!(u16).mapv(half::f16::from_bits)),
        DType::Bf16 => Tensor::Bf16(read!(u16).mapv(half::bf16::from_bits)),
        DType::I64 => Tensor::I64(read!(i64)),
        DType::I32 => Tensor::I32(read!(i32)),
        DType::I16 => Tensor::I16(read!(i16)),
        DType::I8 => Tensor::I8(read!(i8)),
        DType::U64 => Tensor::U64(read!(u64)),
        DType::U32 => Tensor::U32(read!(u32)),
        DType::U16 => Tensor::U16(read!(u16)),
        DType::U8 => Tensor::U8(read!(u8)),
        DType::Bool => Tensor::Bool(read!(u8).mapv(|b| b != 0)),
        DType::String | DType::Other => {
            return Err(std::io::Error::other(format!(
                "{dtype} values are not spilled"
            )))
        }
    })
}

/// Writes all of `buf` at `offset` (positional: the file's cursor is not used).
#[cfg(unix)]
fn write_at(f: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, offset)
}

/// Fills `buf` from `offset` (positional, so readers on several threads need no lock).
#[cfg(unix)]
fn read_at(f: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}

/// Writes all of `buf` at `offset`.
#[cfg(windows)]
fn write_at(f: &std::fs::File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(f, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        (buf, offset) = (&buf[n..], offset + n as u64);
    }
    Ok(())
}

/// Fills `buf` from `offset`.
#[cfg(windows)]
fn read_at(f: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(f, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        (buf, offset) = (&mut buf[n..], offset + n as u64);
    }
    Ok(())
}
