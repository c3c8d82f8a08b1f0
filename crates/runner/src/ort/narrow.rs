//! ONNX Runtime's outputs in the narrow number formats (float8, float4, int4/uint4, int2/uint2): their bytes read
//! from the CPU-side buffer and decoded exactly, element by element, into phantom's carrier for the format (float32
//! for the minifloats, int8/uint8 for the integers), as the reference carries them, so they are compared like any
//! value instead of left out.

use ort::value::{DynTensorValueType, DynValue, TensorElementType, ValueType};

use crate::tensor::formats::Format;
use crate::tensor::Tensor;

/// The value `v`, of narrow element type `ty`, decoded; `Err` says why it cannot be.
pub fn decoded(v: &DynValue, ty: TensorElementType) -> Result<Tensor, String> {
    let code = ort::sys::ONNXTensorElementDataType::from(ty) as i32;
    let format =
        Format::from_onnx(code).ok_or_else(|| format!("element type {ty} is not compared"))?;
    let ValueType::Tensor { shape, .. } = v.dtype() else {
        return Err(format!("a {ty} value that is not a tensor"));
    };
    let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let n: usize = shape.iter().product();
    let t = (v.view().downcast::<DynTensorValueType>()).map_err(|e| e.to_string())?;
    if !t.memory_info().is_cpu_accessible() {
        return Err(format!(
            "the {ty} value lies in device memory phantom does not read"
        ));
    }
    let len = format.packed_bytes(n);
    let ptr = t.data_ptr().cast::<u8>();
    let bytes: &[u8] = match (n, ptr.is_null()) {
        (0, _) => &[],
        (_, true) => return Err(format!("the {ty} value has no data")),
        // SAFETY: ONNX Runtime holds `n` elements of `ty` at `ptr` in CPU memory (checked above): `len` bytes, packed
        // as ONNX packs them; the value outlives this borrow.
        (_, false) => unsafe { std::slice::from_raw_parts(ptr, len) },
    };
    let codes = format
        .unpack(bytes, n)
        .ok_or_else(|| format!("the {ty} value holds fewer bytes than its {n} elements"))?;
    let values: Vec<f64> = codes.into_iter().map(|c| format.decode(c)).collect();
    let a = ndarray::ArrayD::from_shape_vec(shape, values).map_err(|e| e.to_string())?;
    Tensor::from_f64(format.carrier(), a).ok_or_else(|| format!("no carrier for {}", format.name()))
}
