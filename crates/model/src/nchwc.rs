//! ONNX Runtime's NCHWc ops (`com.microsoft.nchwc`, which its optimizer writes at `ORT_ENABLE_ALL` on CPUs with
//! blocked kernels) and the values a model holds in their blocked layout: those its NCHWc ops write (all but
//! `ReorderOutput`, which writes the plain value), and those element-wise ops and `Concat` compute from them (ONNX
//! Runtime's optimizer moves `ReorderOutput` past them). They pair, and compare, in row-major order
//! ([`phantom_core::tensor::Tensor::unblocked`]); a node reading or writing one is not run alone.

use std::collections::HashSet;

use crate::Graph;

/// ONNX Runtime's domain for its blocked CPU ops.
pub const DOMAIN: &str = "com.microsoft.nchwc";

/// Ops that compute element by element (or join along channels) whatever the layout.
const LAYOUT_FREE: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Sum",
    "Max",
    "Min",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Clip",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Elu",
    "Selu",
    "Softplus",
    "Erf",
    "Exp",
    "Neg",
    "Abs",
    "Identity",
    "Concat",
    "QuickGelu",
    "Gelu",
    "FastGelu",
];

/// The model's values in NCHWc blocked layout, empty when it has no NCHWc op.
pub fn blocked(g: &Graph) -> HashSet<String> {
    let mut out: HashSet<String> = HashSet::new();
    for n in &g.nodes {
        let writes = match n.domain == DOMAIN {
            true => n.op_type != "ReorderOutput",
            false => {
                LAYOUT_FREE.contains(&n.op_type.as_str())
                    && n.inputs.iter().any(|i| out.contains(i))
            }
        };
        if writes {
            out.extend(n.outputs.iter().filter(|o| !o.is_empty()).cloned());
        }
    }
    out
}
