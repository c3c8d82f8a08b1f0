//! Conversions between tract tensors and phantom's host tensors.

use tract_onnx::prelude::*;

use crate::tensor::{DType, Tensor as HostTensor};

/// tract's datum type for a host element type.
pub fn datum_type(d: DType) -> DatumType {
    match d {
        DType::F64 => f64::datum_type(),
        DType::F32 => f32::datum_type(),
        DType::F16 => f16::datum_type(),
        DType::I64 => i64::datum_type(),
        DType::I32 => i32::datum_type(),
        DType::I16 => i16::datum_type(),
        DType::I8 => i8::datum_type(),
        DType::U64 => u64::datum_type(),
        DType::U32 => u32::datum_type(),
        DType::U16 => u16::datum_type(),
        DType::U8 => u8::datum_type(),
        DType::Bool => bool::datum_type(),
        DType::String => String::datum_type(),
        DType::Bf16 | DType::Other => f32::datum_type(),
    }
}

/// A model input for the f64 plan: floats widened to f64 (exactly), other types as they are.
pub fn to_tract_f64(t: &HostTensor) -> TValue {
    match t {
        HostTensor::F64(_) | HostTensor::F32(_) | HostTensor::F16(_) | HostTensor::Bf16(_) => {
            t.to_f64_array().into_tvalue()
        }
        HostTensor::I64(a) => a.clone().into_tvalue(),
        HostTensor::I32(a) => a.clone().into_tvalue(),
        HostTensor::I16(a) => a.clone().into_tvalue(),
        HostTensor::I8(a) => a.clone().into_tvalue(),
        HostTensor::U64(a) => a.clone().into_tvalue(),
        HostTensor::U32(a) => a.clone().into_tvalue(),
        HostTensor::U16(a) => a.clone().into_tvalue(),
        HostTensor::U8(a) => a.clone().into_tvalue(),
        HostTensor::Bool(a) => a.clone().into_tvalue(),
        HostTensor::Str(a) => a.clone().into_tvalue(),
    }
}

/// A tract value as a host tensor (`None` for strings and other types phantom does not compare).
pub fn from_tract(v: &TValue) -> Option<HostTensor> {
    let dt = v.datum_type();
    macro_rules! arr {
        ($t:ty) => {
            v.to_plain_array_view::<$t>().ok()?.to_owned()
        };
    }
    Some(match dt {
        DatumType::F64 => HostTensor::F64(arr!(f64)),
        DatumType::F32 => HostTensor::F32(arr!(f32)),
        DatumType::F16 => HostTensor::F16(arr!(f16).mapv(|x| half::f16::from_bits(x.to_bits()))),
        DatumType::I64 => HostTensor::I64(arr!(i64)),
        DatumType::I32 => HostTensor::I32(arr!(i32)),
        DatumType::I16 => HostTensor::I16(arr!(i16)),
        DatumType::I8 => HostTensor::I8(arr!(i8)),
        DatumType::U64 => HostTensor::U64(arr!(u64)),
        DatumType::U32 => HostTensor::U32(arr!(u32)),
        DatumType::U16 => HostTensor::U16(arr!(u16)),
        DatumType::U8 => HostTensor::U8(arr!(u8)),
        DatumType::Bool => HostTensor::Bool(arr!(bool)),
        DatumType::String => HostTensor::Str(arr!(String)),
        DatumType::TDim => HostTensor::I64(
            v.cast_to::<i64>()
                .ok()?
                .to_plain_array_view::<i64>()
                .ok()?
                .to_owned(),
        ),
        _ => return None,
    })
}
