//! FLOPs and bytes moved per kernel, from the op and the shapes ONNX Runtime reports. FLOPs count a multiply-add as
//! two; they are estimated for the ops whose cost the shapes fix (convolutions, matrix products, elementwise ops,
//! reductions, normalizations) and left out for the rest rather than guessed.

use crate::runner::trace::Kernel;

fn elements(dims: &[u64]) -> f64 {
    dims.iter().map(|&d| d as f64).product()
}

/// Bytes of one element of an ONNX Runtime type name (`float`, `float16`, `int64`...).
fn type_bytes(ty: &str) -> u64 {
    match ty {
        "double" | "int64" | "uint64" => 8,
        "float" | "int32" | "uint32" => 4,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        _ => 1,
    }
}

/// Bytes the kernel reads and writes (every input and output once).
pub fn bytes(k: &Kernel) -> u64 {
    k.inputs
        .iter()
        .chain(&k.outputs)
        .map(|(ty, d)| type_bytes(ty) * d.iter().product::<u64>())
        .sum()
}

const ELEMENTWISE: [&str; 24] = [
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Clip",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Pow",
    "Neg",
    "Abs",
    "HardSigmoid",
    "HardSwish",
    "Gelu",
    "QuickGelu",
    "FastGelu",
    "BiasGelu",
    "Max",
    "Min",
];
const REDUCING: [&str; 9] = [
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "AveragePool",
    "MaxPool",
    "ArgMax",
];

/// Estimated floating-point operations, when the op's cost follows from its shapes.
pub fn flops(k: &Kernel) -> Option<f64> {
    let out = elements(&k.outputs.first()?.1);
    let input = |i: usize| k.inputs.get(i).map(|(_, d)| d.as_slice());
    let op = k.op_type.as_str();
    Some(match op {
        "Conv" | "FusedConv" | "QLinearConv" | "ConvInteger" => {
            let w = input(if op == "QLinearConv" { 3 } else { 1 })?;
            2.0 * out * elements(w) / *w.first()? as f64
        }
        "ConvTranspose" => {
            let w = input(1)?;
            2.0 * elements(input(0)?) * elements(w) / *w.first()? as f64
        }
        "MatMul" | "FusedMatMul" | "MatMulInteger" | "MatMulNBits" => {
            2.0 * out * *input(0)?.last()? as f64
        }
        "Gemm" => {
            let (a, o) = (input(0)?, &k.outputs.first()?.1);
            let m = *o.first()?;
            let kdim = if a.first() == Some(&m) {
                a.get(1)
            } else {
                a.first()
            };
            2.0 * out * *kdim? as f64
        }
        "Softmax" | "LogSoftmax" => 5.0 * out,
        "LayerNormalization"
        | "SkipLayerNormalization"
        | "SimplifiedLayerNormalization"
        | "BatchNormalization"
        | "InstanceNormalization"
        | "GroupNormalization" => 8.0 * out,
        _ if ELEMENTWISE.contains(&op) => out,
        _ if REDUCING.contains(&op) => elements(input(0)?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::runner::trace::Kernel;

    fn k(op: &str, inputs: Vec<Vec<u64>>, out: Vec<u64>) -> Kernel {
        Kernel {
            node: "n".into(),
            op_type: op.into(),
            provider: String::new(),
            ts: 0,
            dur_us: 1,
            inputs: inputs
                .into_iter()
                .map(|d| ("float".to_string(), d))
                .collect(),
            outputs: vec![("float".to_string(), out)],
            output_bytes: 0,
            mem_peak: 0,
        }
    }

    #[test]
    fn flops_of_the_heavy_ops_follow_their_shapes() {
        // 3x3 conv, 3 → 4 channels, 6x6 output: 4·36 outputs × 27 MACs × 2.
        let conv = k(
            "Conv",
            vec![vec![1, 3, 8, 8], vec![4, 3, 3, 3]],
            vec![1, 4, 6, 6],
        );
        assert_eq!(super::flops(&conv), Some(2.0 * 144.0 * 27.0));
        // Depthwise: groups = channels, W is [C, 1, 3, 3].
        let dw = k(
            "Conv",
            vec![vec![1, 8, 8, 8], vec![8, 1, 3, 3]],
            vec![1, 8, 6, 6],
        );
        assert_eq!(super::flops(&dw), Some(2.0 * 288.0 * 9.0));
        let mm = k("MatMul", vec![vec![2, 5, 7], vec![7, 3]], vec![2, 5, 3]);
        assert_eq!(super::flops(&mm), Some(2.0 * 30.0 * 7.0));
        let gemm_t = k("Gemm", vec![vec![7, 5], vec![3, 7]], vec![5, 3]);
        assert_eq!(
            super::flops(&gemm_t),
            Some(2.0 * 15.0 * 7.0),
            "transA: K is A's first dim"
        );
        assert_eq!(super::flops(&k("Reshape", vec![vec![4]], vec![2, 2])), None);
        assert_eq!(super::bytes(&mm), 4 * (70 + 21 + 30));
    }
}
