//! Conversions between ONNX `TensorProto` messages and host [`Tensor`]s (test_data_set `.pb` files, constants).

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use prost::Message;
use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, TensorProto};

use crate::error::{Error, Result};
use crate::tensor::formats::Format;
use crate::tensor::{DType, Tensor};

/// Reads a serialized `TensorProto` file (the `input_N.pb` of ONNX test data sets), or an `OptionalProto` that
/// holds a tensor (the suite writes one for an optional input; [`super::optional`]).
pub fn read_tensor_pb(path: &Path) -> Result<(String, Tensor)> {
    let limit = crate::fsutil::input_budget() as u64;
    let bytes = crate::error::read_bounded(path, limit, "TensorProto input")?;
    let bad = |reason: String| Error::Input {
        name: path.display().to_string(),
        reason,
    };
    if bytes.is_empty() {
        return Err(bad(
            "the file is empty; it should hold a serialized TensorProto".into(),
        ));
    }
    let tensor = TensorProto::decode(bytes.as_slice());
    // An OptionalProto reads as a TensorProto too: with a segment (its field 3, the optional's tensor), or with no
    // data (an empty optional). Only then are the bytes read as one.
    let plain = matches!(&tensor, Ok(p) if p.segment.is_none() && has_data(p));
    if let Some(held) = (!plain).then(|| super::optional::held(&bytes)).flatten() {
        let proto = held.into_tensor().map_err(bad)?;
        return tensor_of_file(path, &proto);
    }
    let proto = tensor.map_err(|e| bad(format!("not a serialized TensorProto: {e}")))?;
    tensor_of_file(path, &proto)
}

/// Whether `p` carries elements (or needs none: it has a zero dim).
fn has_data(p: &TensorProto) -> bool {
    !(p.raw_data.is_empty()
        && p.float_data.is_empty()
        && p.int32_data.is_empty()
        && p.string_data.is_empty()
        && p.int64_data.is_empty()
        && p.double_data.is_empty()
        && p.uint64_data.is_empty()
        && p.external_data.is_empty())
        || p.dims.contains(&0)
}

/// The tensor `proto` read from file `path`, with its name; errors name the file.
fn tensor_of_file(path: &Path, proto: &TensorProto) -> Result<(String, Tensor)> {
    let t = tensor_from_proto(proto, path.parent()).map_err(|e| match e {
        Error::Input { name, reason } if name.is_empty() => Error::Input {
            name: path.display().to_string(),
            reason,
        },
        Error::Input { name, reason } => Error::Input {
            name: format!("{name} (file {})", path.display()),
            reason,
        },
        other => other,
    })?;
    Ok((proto.name.clone(), t))
}

fn shape_of(p: &TensorProto) -> Result<Vec<usize>> {
    p.dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::Input {
                name: p.name.clone(),
                reason: format!("negative dim {d}"),
            })
        })
        .collect()
}

fn from_le<T, const N: usize>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunk size")))
        .collect()
}

/// Exactly `len` bytes of the regular file `path` from `offset` (external data), without reading the rest.
fn read_range(path: &Path, offset: u64, len: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let end = offset.checked_add(len as u64).filter(|&e| e <= meta.len());
    if end.is_none() {
        return Err(format!(
            "holds {} bytes; the tensor needs {len} from offset {offset}",
            meta.len()
        ));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    f.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(len);
    f.take(len as u64)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() != len {
        return Err(format!("ended after {} of {len} bytes", out.len()));
    }
    Ok(out)
}

/// Decodes a `TensorProto` (raw_data, typed fields, or external data resolved against `base`).
/// A string tensor from its `string_data` (UTF-8; bytes that are not are replaced, as they cannot be compared).
fn strings(p: &TensorProto, shape: &[usize]) -> Result<Tensor> {
    let values: Vec<String> = (p.string_data.iter())
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), values)
        .map(Tensor::Str)
        .map_err(|_| {
            bad_tensor(
                p,
                format!(
                    "holds {} strings, its shape {shape:?} needs another number",
                    p.string_data.len()
                ),
            )
        })
}

pub fn tensor_from_proto(p: &TensorProto, base: Option<&Path>) -> Result<Tensor> {
    let shape = shape_of(p)?;
    let dtype = DType::from_onnx(p.data_type);
    let n = crate::tensor::checked_nbytes(&shape, 1).ok_or_else(|| {
        bad_tensor(
            p,
            format!("its dims {shape:?} have more elements than can be addressed"),
        )
    })?;
    if dtype == DType::String {
        return strings(p, &shape);
    }
    let format = Format::from_onnx(p.data_type);
    let external;
    let raw: &[u8] = if p.data_location == Some(1) {
        external = external_data(p, base, &shape, n)?;
        &external
    } else {
        &p.raw_data
    };
    if let Some(f) = format {
        return narrow(p, f, &shape, raw);
    }
    let src = Elements {
        p,
        shape: &shape,
        raw,
        use_raw: !raw.is_empty() || n == 0,
    };
    let t = match src.floats(dtype).or_else(|| src.integers(dtype)) {
        Some(t) => t,
        None => {
            return Err(bad_tensor(
                p,
                format!(
                    "element type {} (ONNX code {}) is not supported",
                    dtype, p.data_type
                ),
            ))
        }
    };
    t.map_err(|_| {
        bad_tensor(
            p,
            format!("holds a different number of elements than its shape {shape:?} needs"),
        )
    })
}

/// A tensor of a narrow format (float8, float4, int4, int2) decoded exactly into its carrier type: from `raw` bytes
/// when there are any, else from `int32_data` (one stored byte per entry, as ONNX packs them).
fn narrow(p: &TensorProto, f: Format, shape: &[usize], raw: &[u8]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let bytes: Vec<u8> = match raw.is_empty() && n > 0 {
        true => p.int32_data.iter().map(|&v| v as u8).collect(),
        false => raw.to_vec(),
    };
    let codes = f.unpack(&bytes, n).ok_or_else(|| {
        bad_tensor(
            p,
            format!(
                "holds {} bytes; {n} {} elements of dims {shape:?} take {}",
                bytes.len(),
                f.name(),
                f.packed_bytes(n)
            ),
        )
    })?;
    let values = codes.iter().map(|&c| f.decode(c));
    let t = match f.carrier() {
        DType::I8 => shaped(shape, values.map(|v| v as i8).collect()).map(Tensor::I8),
        DType::U8 => shaped(shape, values.map(|v| v as u8).collect()).map(Tensor::U8),
        _ => shaped(shape, values.map(|v| v as f32).collect()).map(Tensor::F32),
    };
    Ok(t.expect("as many codes as the shape holds"))
}

/// The error for tensor `p` that cannot be decoded, and why.
fn bad_tensor(p: &TensorProto, reason: String) -> Error {
    Error::Input {
        name: p.name.clone(),
        reason,
    }
}

/// The bytes of `p`'s external data: its `n` elements of its type, packed as ONNX stores them.
fn external_data(
    p: &TensorProto,
    base: Option<&Path>,
    shape: &[usize],
    n: usize,
) -> Result<Vec<u8>> {
    let dtype = DType::from_onnx(p.data_type);
    let format = Format::from_onnx(p.data_type);
    let need = match format {
        Some(f) => Some(f.packed_bytes(n)),
        None => n.checked_mul(dtype.size()).filter(|_| dtype.size() > 0),
    };
    let name = format.map_or(dtype.name(), |f| f.name());
    let need = need.ok_or_else(|| {
        bad_tensor(
            p,
            format!("external {name} data of dims {shape:?} cannot be sized"),
        )
    })?;
    external_bytes(p, base, shape, need, name)
}

/// The bytes of a tensor as ONNX stores them (from its external data, or its `raw_data`); `None` for a tensor
/// held in a typed field (`float_data`, `string_data`...).
pub fn stored_bytes(p: &TensorProto, base: Option<&Path>) -> Result<Option<Vec<u8>>> {
    if p.data_location != Some(1) {
        return Ok((!p.raw_data.is_empty()).then(|| p.raw_data.clone()));
    }
    let shape = shape_of(p)?;
    let n = crate::tensor::checked_nbytes(&shape, 1)
        .ok_or_else(|| bad_tensor(p, format!("its dims {shape:?} have too many elements")))?;
    external_data(p, base, &shape, n).map(Some)
}

/// The bytes of `p`'s external data (`need` bytes of type `name`, dims `shape`), from the file its `location`
/// names beside `base`, checked against its declared `length`.
fn external_bytes(
    p: &TensorProto,
    base: Option<&Path>,
    shape: &[usize],
    need: usize,
    name: &str,
) -> Result<Vec<u8>> {
    let bad = |reason: String| bad_tensor(p, reason);
    let (path, offset, length) =
        external_location(p, base).ok_or_else(|| bad("external data without a location".into()))?;
    let loc = path
        .strip_prefix(base.unwrap_or(Path::new(".")))
        .unwrap_or(&path)
        .display()
        .to_string();
    if let Some(len) = length.filter(|&l| l != need as u64) {
        return Err(bad(format!(
            "{loc}: declared length {len} bytes, its dims {shape:?} of {name} need {need}"
        )));
    }
    read_range(&path, offset, need).map_err(|why| bad(format!("{loc}: {why}")))
}

/// Where `p`'s external data lies: the file its `location` names, beside `base`; the offset (0 when absent); and the
/// declared length, if any. `None` without a location.
pub fn external_location(
    p: &TensorProto,
    base: Option<&Path>,
) -> Option<(PathBuf, u64, Option<u64>)> {
    let entry = |k: &str| {
        p.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let path = base.unwrap_or(Path::new(".")).join(entry("location")?);
    let number = |k: &str| entry(k).and_then(|v| v.parse::<u64>().ok());
    Some((path, number("offset").unwrap_or(0), number("length")))
}

/// `v` as an array of `shape`, or the error when their sizes differ.
fn shaped<T>(shape: &[usize], v: Vec<T>) -> std::result::Result<ArrayD<T>, ndarray::ShapeError> {
    ArrayD::from_shape_vec(IxDyn(shape), v)
}

/// Where a tensor's elements come from: little-endian `raw` bytes when `use_raw`, else `p`'s typed field.
struct Elements<'a> {
    p: &'a TensorProto,
    shape: &'a [usize],
    raw: &'a [u8],
    use_raw: bool,
}

/// Decoded elements, or the error when their number does not fit the shape.
type Decoded = std::result::Result<Tensor, ndarray::ShapeError>;

impl Elements<'_> {
    /// The elements of a floating-point `dtype`; `None` for any other type.
    fn floats(&self, dtype: DType) -> Option<Decoded> {
        let (p, shape, raw, use_raw) = (self.p, self.shape, self.raw, self.use_raw);
        Some(match dtype {
            DType::F32 if use_raw => {
                shaped(shape, from_le(raw, f32::from_le_bytes)).map(Tensor::F32)
            }
            DType::F32 => shaped(shape, p.float_data.clone()).map(Tensor::F32),
            DType::F64 if use_raw => {
                shaped(shape, from_le(raw, f64::from_le_bytes)).map(Tensor::F64)
            }
            DType::F64 => shaped(shape, p.double_data.clone()).map(Tensor::F64),
            DType::F16 if use_raw => shaped(
                shape,
                from_le(raw, |b| f16::from_bits(u16::from_le_bytes(b))),
            )
            .map(Tensor::F16),
            DType::F16 => shaped(
                shape,
                p.int32_data
                    .iter()
                    .map(|&v| f16::from_bits(v as u16))
                    .collect(),
            )
            .map(Tensor::F16),
            DType::Bf16 if use_raw => shaped(
                shape,
                from_le(raw, |b| bf16::from_bits(u16::from_le_bytes(b))),
            )
            .map(Tensor::Bf16),
            DType::Bf16 => shaped(
                shape,
                p.int32_data
                    .iter()
                    .map(|&v| bf16::from_bits(v as u16))
                    .collect(),
            )
            .map(Tensor::Bf16),
            _ => return None,
        })
    }

    /// The elements of an integer or boolean `dtype`; `None` for any other type.
    fn integers(&self, dtype: DType) -> Option<Decoded> {
        let (p, shape, raw, use_raw) = (self.p, self.shape, self.raw, self.use_raw);
        Some(match dtype {
            DType::I64 if use_raw => {
                shaped(shape, from_le(raw, i64::from_le_bytes)).map(Tensor::I64)
            }
            DType::I64 => shaped(shape, p.int64_data.clone()).map(Tensor::I64),
            DType::I32 if use_raw => {
                shaped(shape, from_le(raw, i32::from_le_bytes)).map(Tensor::I32)
            }
            DType::I32 => shaped(shape, p.int32_data.clone()).map(Tensor::I32),
            DType::I16 if use_raw => {
                shaped(shape, from_le(raw, i16::from_le_bytes)).map(Tensor::I16)
            }
            DType::I16 => {
                shaped(shape, p.int32_data.iter().map(|&v| v as i16).collect()).map(Tensor::I16)
            }
            DType::I8 if use_raw => {
                shaped(shape, raw.iter().map(|&b| b as i8).collect()).map(Tensor::I8)
            }
            DType::I8 => {
                shaped(shape, p.int32_data.iter().map(|&v| v as i8).collect()).map(Tensor::I8)
            }
            DType::U8 if use_raw => shaped(shape, raw.to_vec()).map(Tensor::U8),
            DType::U8 => {
                shaped(shape, p.int32_data.iter().map(|&v| v as u8).collect()).map(Tensor::U8)
            }
            DType::U16 if use_raw => {
                shaped(shape, from_le(raw, u16::from_le_bytes)).map(Tensor::U16)
            }
            DType::U16 => {
                shaped(shape, p.int32_data.iter().map(|&v| v as u16).collect()).map(Tensor::U16)
            }
            DType::U32 if use_raw => {
                shaped(shape, from_le(raw, u32::from_le_bytes)).map(Tensor::U32)
            }
            DType::U32 => {
                shaped(shape, p.uint64_data.iter().map(|&v| v as u32).collect()).map(Tensor::U32)
            }
            DType::U64 if use_raw => {
                shaped(shape, from_le(raw, u64::from_le_bytes)).map(Tensor::U64)
            }
            DType::U64 => shaped(shape, p.uint64_data.clone()).map(Tensor::U64),
            DType::Bool if use_raw => {
                shaped(shape, raw.iter().map(|&b| b != 0).collect()).map(Tensor::Bool)
            }
            DType::Bool => {
                shaped(shape, p.int32_data.iter().map(|&v| v != 0).collect()).map(Tensor::Bool)
            }
            _ => return None,
        })
    }
}

/// Encodes a host tensor as a `TensorProto` with `raw_data`.
pub fn tensor_to_proto(name: &str, t: &Tensor) -> TensorProto {
    let dims = t.shape().iter().map(|&d| d as i64).collect();
    if let Some(s) = t.strings() {
        return TensorProto {
            name: name.to_string(),
            dims,
            data_type: t.dtype().onnx_code(),
            string_data: s.iter().map(|x| x.as_bytes().to_vec()).collect(),
            ..Default::default()
        };
    }
    let mut raw = Vec::with_capacity(t.nbytes());
    macro_rules! put {
        ($a:expr, $f:expr) => {
            for v in $a.iter() {
                raw.extend_from_slice(&$f(*v));
            }
        };
    }
    // Plain numbers in standard layout on a little-endian machine are already ONNX's raw bytes: one copy (element
    // by element, widening a model's weights to f64 took a sixth of a ResNet-18 run).
    macro_rules! num {
        ($a:expr, $f:expr) => {
            match $a.as_slice() {
                Some(s) if cfg!(target_endian = "little") => {
                    raw.extend_from_slice(bytemuck::cast_slice(s))
                }
                _ => put!($a, $f),
            }
        };
    }
    match t {
        Tensor::F64(a) => num!(a, f64::to_le_bytes),
        Tensor::F32(a) => num!(a, f32::to_le_bytes),
        Tensor::F16(a) => put!(a, |v: f16| v.to_bits().to_le_bytes()),
        Tensor::Bf16(a) => put!(a, |v: bf16| v.to_bits().to_le_bytes()),
        Tensor::I64(a) => num!(a, i64::to_le_bytes),
        Tensor::I32(a) => num!(a, i32::to_le_bytes),
        Tensor::I16(a) => num!(a, i16::to_le_bytes),
        Tensor::I8(a) => num!(a, i8::to_le_bytes),
        Tensor::U64(a) => num!(a, u64::to_le_bytes),
        Tensor::U32(a) => num!(a, u32::to_le_bytes),
        Tensor::U16(a) => num!(a, u16::to_le_bytes),
        Tensor::U8(a) => num!(a, u8::to_le_bytes),
        Tensor::Bool(a) => put!(a, |v: bool| [v as u8]),
        Tensor::Str(_) => {}
    }
    TensorProto {
        name: name.to_string(),
        dims,
        data_type: t.dtype().onnx_code(),
        raw_data: raw,
        ..Default::default()
    }
}

/// An int64 scalar initializer (for the nodes phantom writes into a graph).
pub fn scalar_i64(name: &str, v: i64) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: 7,
        int64_data: vec![v],
        ..Default::default()
    }
}

/// An integer attribute.
pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

/// An integer-list attribute.
pub fn ints_attr(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: v,
        ..Default::default()
    }
}
