//! Stored data ONNX Runtime's loader refuses, checked before any engine runs: a tensor (initializer, `Constant` or
//! other tensor attribute) whose data holds another number of elements than its dims say (a `Constant` of dims
//! `[0]` holding one float made the reference and the shaders hang), and a constant `Reshape` target no tensor can
//! have (an entry below −1, or one beyond the elements any memory holds, such as INT64_MAX).

use tract_onnx::pb::{GraphProto, NodeProto, TensorProto};

/// The most elements a tensor phantom can hold has (2⁴⁰: a shape entry beyond it describes no real tensor).
const MOST_ELEMENTS: i64 = 1 << 40;

/// Bytes per element of the types whose raw data is counted here (`None`: not checked, e.g. packed 4-bit types).
fn element_bytes(data_type: i32) -> Option<usize> {
    match data_type {
        2 | 3 | 9 | 17..=20 => Some(1), // uint8, int8, bool, float8 variants
        4 | 5 | 10 | 16 => Some(2),     // uint16, int16, float16, bfloat16
        1 | 6 | 12 => Some(4),          // float, int32, uint32
        7 | 11 | 13 | 14 => Some(8),    // int64, double, uint64, complex64
        15 => Some(16),                 // complex128
        _ => None,
    }
}

/// How many elements the tensor's stored data holds, where it is stored in the file and of a counted type.
fn stored_elements(t: &TensorProto) -> Option<usize> {
    if t.data_location == Some(1) {
        return None;
    }
    let bytes = element_bytes(t.data_type)?;
    let complex = matches!(t.data_type, 14 | 15);
    let per = |n: usize| if complex { n / 2 } else { n };
    match () {
        _ if !t.raw_data.is_empty() => Some(t.raw_data.len() / bytes),
        _ if !t.float_data.is_empty() => Some(per(t.float_data.len())),
        _ if !t.double_data.is_empty() => Some(per(t.double_data.len())),
        _ if !t.int32_data.is_empty() => Some(t.int32_data.len()),
        _ if !t.int64_data.is_empty() => Some(t.int64_data.len()),
        _ if !t.uint64_data.is_empty() => Some(t.uint64_data.len()),
        _ => None,
    }
}

/// The tensor's data holds as many elements as its dims say (or its dims are left to other checks).
pub fn tensor_data(t: &TensorProto, what: &str) -> Result<(), String> {
    let Some(held) = stored_elements(t) else {
        return Ok(());
    };
    let dims: Option<Vec<usize>> = t.dims.iter().map(|&d| usize::try_from(d).ok()).collect();
    let Some(want) = dims.and_then(|d| d.iter().try_fold(1usize, |a, &x| a.checked_mul(x))) else {
        return Ok(());
    };
    match held == want {
        true => Ok(()),
        false => Err(format!(
            "{what} has dims {:?} ({want} elements) but its data holds {held}: the file is corrupt or its writer is \
             broken",
            t.dims
        )),
    }
}

/// Every initializer's and tensor attribute's data agrees with its dims; every constant Reshape target is one a
/// tensor can have.
pub fn check_graph(g: &GraphProto) -> Result<(), String> {
    for t in &g.initializer {
        tensor_data(t, &format!("initializer `{}`", t.name))?;
    }
    for (i, n) in g.node.iter().enumerate() {
        for a in &n.attribute {
            for t in a.t.iter().chain(&a.tensors) {
                tensor_data(
                    t,
                    &format!("{}, attribute `{}`", super::loader_rules::at(i, n), a.name),
                )?;
            }
        }
        if n.op_type == "Reshape" && (n.domain.is_empty() || n.domain == "ai.onnx") {
            reshape_target(g, n)
                .map_err(|why| format!("{}: {why}", super::loader_rules::at(i, n)))?;
        }
    }
    Ok(())
}

/// The constant (initializer or `Constant`) target shape of a Reshape, decoded, if it is one.
fn constant_shape(g: &GraphProto, name: &str) -> Option<Vec<i64>> {
    let t = g.initializer.iter().find(|t| t.name == name).or_else(|| {
        (g.node.iter())
            .find(|n| n.op_type == "Constant" && n.output.first().is_some_and(|o| o == name))
            .and_then(|n| n.attribute.iter().find(|a| a.name == "value"))
            .and_then(|a| a.t.as_ref())
    })?;
    match (t.data_type, t.raw_data.is_empty()) {
        (7, true) => Some(t.int64_data.clone()),
        (7, false) => Some(
            (t.raw_data.chunks_exact(8))
                .map(|c| i64::from_le_bytes(c.try_into().expect("chunks of 8")))
                .collect(),
        ),
        _ => None,
    }
}

fn reshape_target(g: &GraphProto, n: &NodeProto) -> Result<(), String> {
    let Some(shape) = n.input.get(1).and_then(|s| constant_shape(g, s)) else {
        return Ok(());
    };
    match shape.iter().find(|&&d| !(-1..=MOST_ELEMENTS).contains(&d)) {
        Some(d) => Err(format!(
            "its target shape {shape:?} holds {d}, which no tensor can have (entries are −1, 0 or a length): fix \
             the exporter that wrote it"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_that_contradicts_its_dims_is_named() {
        let t = TensorProto {
            name: "c".into(),
            data_type: 1,
            dims: vec![0],
            float_data: vec![1.0],
            ..Default::default()
        };
        assert!(tensor_data(&t, "the tensor")
            .unwrap_err()
            .contains("holds 1"));
        let ok = TensorProto {
            dims: vec![1],
            ..t.clone()
        };
        assert!(tensor_data(&ok, "the tensor").is_ok());
        let raw = TensorProto {
            dims: vec![3],
            float_data: vec![],
            raw_data: vec![0; 8],
            ..t
        };
        assert!(tensor_data(&raw, "the tensor").is_err());
    }
}
