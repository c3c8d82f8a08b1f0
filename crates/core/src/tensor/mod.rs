//! Host tensors of every ONNX element type phantom compares, with lossless widening to f64.
//!
//! Runners hand back [`Tensor`]s keyed by ONNX value name; comparison widens both sides to f64 (exact for every
//! float type up to f64 and for integers up to 2^53) and keeps the original [`DType`] for ULP distances.

pub mod formats;
mod layout;
pub use layout::{nchwc_block_size, nchwc_filter_bibo, nchwc_filter_sources};
pub mod narrow;

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use serde::{Deserialize, Serialize};

/// ONNX element types (the `TensorProto.DataType` numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F64,
    F32,
    F16,
    Bf16,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
    String,
    /// Any other ONNX element type (complex, float8, int4...), by its ONNX code.
    Other,
}

impl DType {
    /// Maps an ONNX `TensorProto.DataType` code.
    pub fn from_onnx(code: i32) -> DType {
        match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            8 => DType::String,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::Bf16,
            _ => DType::Other,
        }
    }

    /// The ONNX code of this type (0 for `Other`).
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::Bf16 => 16,
            DType::Other => 0,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::Bf16)
    }

    /// Signed or unsigned integers of any width (not booleans).
    pub fn is_integer(self) -> bool {
        use DType::*;
        matches!(self, I64 | I32 | I16 | I8 | U64 | U32 | U16 | U8)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U64 => "u64",
            DType::U32 => "u32",
            DType::U16 => "u16",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::String => "string",
            DType::Other => "other",
        }
    }

    /// Size of one element in bytes (0 where it has none).
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::String | DType::Other => 0,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A dense host tensor of one of the element types runners exchange.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    F64(ArrayD<f64>),
    F32(ArrayD<f32>),
    F16(ArrayD<f16>),
    Bf16(ArrayD<bf16>),
    I64(ArrayD<i64>),
    I32(ArrayD<i32>),
    I16(ArrayD<i16>),
    I8(ArrayD<i8>),
    U64(ArrayD<u64>),
    U32(ArrayD<u32>),
    U16(ArrayD<u16>),
    U8(ArrayD<u8>),
    Bool(ArrayD<bool>),
    /// UTF-8 strings (ONNX `STRING`: scikit-learn's class labels and categories). They have no numeric view:
    /// they compare by equality ([`Tensor::strings`]), and their f64 widening is NaN.
    Str(ArrayD<String>),
}

/// Applies `$body` to the array inside any numeric [`Tensor`] variant, binding it as `$a`; a string tensor
/// evaluates `$strings` (binding its array as `$s`).
#[macro_export]
macro_rules! dispatch_tensor {
    ($t:expr, $a:ident => $body:expr, $s:ident => $strings:expr) => {
        match $t {
            $crate::tensor::Tensor::Str($s) => $strings,
            $crate::tensor::Tensor::F64($a) => $body,
            $crate::tensor::Tensor::F32($a) => $body,
            $crate::tensor::Tensor::F16($a) => $body,
            $crate::tensor::Tensor::Bf16($a) => $body,
            $crate::tensor::Tensor::I64($a) => $body,
            $crate::tensor::Tensor::I32($a) => $body,
            $crate::tensor::Tensor::I16($a) => $body,
            $crate::tensor::Tensor::I8($a) => $body,
            $crate::tensor::Tensor::U64($a) => $body,
            $crate::tensor::Tensor::U32($a) => $body,
            $crate::tensor::Tensor::U16($a) => $body,
            $crate::tensor::Tensor::U8($a) => $body,
            $crate::tensor::Tensor::Bool($a) => $body,
        }
    };
}

/// Lossless widening of one element to f64 (integers beyond 2^53 round).
pub trait ToF64: Copy {
    fn to_f64(self) -> f64;
}

macro_rules! to_f64_as {
    ($($t:ty),*) => { $(impl ToF64 for $t { #[inline] fn to_f64(self) -> f64 { self as f64 } })* };
}
to_f64_as!(f64, f32, i64, i32, i16, i8, u64, u32, u16, u8);
impl ToF64 for f16 {
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
impl ToF64 for bf16 {
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
impl ToF64 for bool {
    #[inline]
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
}

/// Bytes of a tensor of `shape` with `elem`-byte elements, or `None` when the product overflows — or when the
/// product of its non-zero dims exceeds `isize::MAX`, which ndarray refuses even for an empty array (a shape
/// `(2^63, 0)` holds nothing but cannot be built).
pub fn checked_nbytes(shape: &[usize], elem: usize) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |a, &d| a.checked_mul(d))?;
    if nonzero > isize::MAX as usize {
        return None;
    }
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))?
        .checked_mul(elem)
}

/// Elements of ONNX `dims` (an initializer's), or `None` when one is negative or the product overflows.
pub fn onnx_elements(dims: &[i64]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?))
}

impl Tensor {
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F64(_) => DType::F64,
            Tensor::F32(_) => DType::F32,
            Tensor::F16(_) => DType::F16,
            Tensor::Bf16(_) => DType::Bf16,
            Tensor::I64(_) => DType::I64,
            Tensor::I32(_) => DType::I32,
            Tensor::I16(_) => DType::I16,
            Tensor::I8(_) => DType::I8,
            Tensor::U64(_) => DType::U64,
            Tensor::U32(_) => DType::U32,
            Tensor::U16(_) => DType::U16,
            Tensor::U8(_) => DType::U8,
            Tensor::Bool(_) => DType::Bool,
            Tensor::Str(_) => DType::String,
        }
    }

    pub fn shape(&self) -> &[usize] {
        dispatch_tensor!(self, a => a.shape(), s => s.shape())
    }

    pub fn len(&self) -> usize {
        dispatch_tensor!(self, a => a.len(), s => s.len())
    }

    /// The strings of a string tensor.
    pub fn strings(&self) -> Option<&ArrayD<String>> {
        match self {
            Tensor::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements lie in row-major order with no gaps (what ONNX Runtime reads without a copy).
    pub fn is_standard_layout(&self) -> bool {
        dispatch_tensor!(self, a => a.is_standard_layout(), s => s.is_standard_layout())
    }

    /// The same elements in logical order under `shape` (None when the sizes differ).
    pub fn reshaped(&self, shape: &[usize]) -> Option<Tensor> {
        if shape.iter().product::<usize>() != self.len() {
            return None;
        }
        let t = self.standard_layout();
        let dims = ndarray::IxDyn(shape);
        macro_rules! re {
            ($($v:ident),*) => {
                match t.as_ref() {
                    $(Tensor::$v(a) => Tensor::$v(a.clone().into_shape_with_order(dims).ok()?),)*
                }
            };
        }
        Some(re!(
            F64, F32, F16, Bf16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, Str
        ))
    }

    /// The tensor in row-major layout: borrowed when it already is, else a copy (a transposed or sliced view).
    pub fn standard_layout(&self) -> std::borrow::Cow<'_, Tensor> {
        if self.is_standard_layout() {
            return std::borrow::Cow::Borrowed(self);
        }
        let copy = match self {
            Tensor::F64(a) => Tensor::F64(a.as_standard_layout().into_owned()),
            Tensor::F32(a) => Tensor::F32(a.as_standard_layout().into_owned()),
            Tensor::F16(a) => Tensor::F16(a.as_standard_layout().into_owned()),
            Tensor::Bf16(a) => Tensor::Bf16(a.as_standard_layout().into_owned()),
            Tensor::I64(a) => Tensor::I64(a.as_standard_layout().into_owned()),
            Tensor::I32(a) => Tensor::I32(a.as_standard_layout().into_owned()),
            Tensor::I16(a) => Tensor::I16(a.as_standard_layout().into_owned()),
            Tensor::I8(a) => Tensor::I8(a.as_standard_layout().into_owned()),
            Tensor::U64(a) => Tensor::U64(a.as_standard_layout().into_owned()),
            Tensor::U32(a) => Tensor::U32(a.as_standard_layout().into_owned()),
            Tensor::U16(a) => Tensor::U16(a.as_standard_layout().into_owned()),
            Tensor::U8(a) => Tensor::U8(a.as_standard_layout().into_owned()),
            Tensor::Bool(a) => Tensor::Bool(a.as_standard_layout().into_owned()),
            Tensor::Str(a) => Tensor::Str(a.as_standard_layout().into_owned()),
        };
        std::borrow::Cow::Owned(copy)
    }

    /// Bytes held by the elements (a string's: its UTF-8 bytes and its header).
    pub fn nbytes(&self) -> usize {
        match self {
            Tensor::Str(s) => s
                .iter()
                .map(|x| x.len() + std::mem::size_of::<String>())
                .sum(),
            _ => self.len() * self.dtype().size(),
        }
    }

    /// The elements as f64, borrowed when the tensor already is f64.
    pub fn as_f64(&self) -> std::borrow::Cow<'_, ArrayD<f64>> {
        match self {
            Tensor::F64(a) => std::borrow::Cow::Borrowed(a),
            _ => std::borrow::Cow::Owned(self.to_f64_array()),
        }
    }

    /// Every element widened to f64, in logical (row-major) order.
    pub fn to_f64_array(&self) -> ArrayD<f64> {
        match self {
            Tensor::F64(a) => a.clone(),
            _ => dispatch_tensor!(self, a => a.mapv(|v| v.to_f64()), s => s.mapv(|_| f64::NAN)),
        }
    }

    /// Casts to `dtype` the way ONNX `Cast` does for the float and integer types (round to nearest even for
    /// floats, truncation toward zero for float-to-int).
    pub fn cast(&self, dtype: DType) -> Option<Tensor> {
        let a = self.as_f64();
        Some(match dtype {
            DType::F64 => Tensor::F64(a.into_owned()),
            DType::F32 => Tensor::F32(a.mapv(|v| v as f32)),
            DType::F16 => Tensor::F16(a.mapv(narrow::f16_of)),
            DType::Bf16 => Tensor::Bf16(a.mapv(narrow::bf16_of)),
            DType::I64 => Tensor::I64(a.mapv(|v| v as i64)),
            DType::I32 => Tensor::I32(a.mapv(|v| v as i32)),
            DType::I16 => Tensor::I16(a.mapv(|v| v as i16)),
            DType::I8 => Tensor::I8(a.mapv(|v| v as i8)),
            DType::U64 => Tensor::U64(a.mapv(|v| v as u64)),
            DType::U32 => Tensor::U32(a.mapv(|v| v as u32)),
            DType::U16 => Tensor::U16(a.mapv(|v| v as u16)),
            DType::U8 => Tensor::U8(a.mapv(|v| v as u8)),
            DType::Bool => Tensor::Bool(a.mapv(|v| v != 0.0)),
            DType::String | DType::Other => return None,
        })
    }

    /// Builds a tensor from f64 values, rounding to `dtype`.
    pub fn from_f64(dtype: DType, a: ArrayD<f64>) -> Option<Tensor> {
        Tensor::F64(a).cast(dtype)
    }

    /// A scalar-shaped empty helper used in tests and generators.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Option<Tensor> {
        Tensor::from_f64(dtype, ArrayD::zeros(IxDyn(shape)))
    }
}
