//! What an op family declares: the [`Kernel`] contract each of phantom's f64 kernels implements, and the [`Row`]
//! that names one op, its kernel and the domains phantom claims it in. Each family lists its rows in one `TABLE`;
//! [`super::FAMILIES`] gathers the tables, so adding an op is one row (and, for a new family, one file).

use tract_onnx::prelude::*;

use super::node::{Fact, Node};

/// Prefix of the op types phantom claims.
pub const PREFIX: &str = "phantom.";

/// Starts a kernel's typing error that is the model's fault (an axis outside the rank), not a gap in the reference:
/// such a node is never stood in for; the model is refused.
pub const INVALID: &str = "the model is invalid: ";

/// One contrib op: the facts of its outputs and their values, both for every ONNX output slot.
///
/// A kernel implements [`Kernel::facts`], or, when input values decide its outputs' shapes,
/// [`Kernel::value_slots`] and [`Kernel::facts_valued`] (each defaults to the other: implement one).
pub trait Kernel: Sync {
    /// Element type and shape of every ONNX output, from the inputs' facts (indexed by ONNX slot); for a kernel
    /// with [`Kernel::value_slots`], its [`Kernel::facts_valued`] with no value known.
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        self.facts_valued(n, ins, &[])
    }
    /// Every ONNX output, computed in f64 (integer outputs in their own type).
    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>>;
    /// Whether tract may evaluate the node while typing, when its inputs are known then (false for a stand-in).
    fn folds(&self) -> bool {
        true
    }
    /// ONNX input slots whose values, not only their types and shapes, decide the outputs' facts (axes, pads).
    fn value_slots(&self) -> &'static [usize] {
        &[]
    }
    /// [`Kernel::facts`] for a kernel with [`Kernel::value_slots`]: `values` holds the value of each ONNX slot
    /// that tract knows before the run (`None` elsewhere).
    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        _values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        self.facts(n, ins)
    }
}

/// One op phantom has a kernel for: registered with tract as `phantom.<op>`, and claimed in ORT's contrib domain
/// and `ai.onnx.ml`, or in any domain ([`Row::any_domain`]). A family's predicate in [`super::claims`] may claim it
/// elsewhere too (LayerNormalization, Squeeze, the recurrent ops, ...).
pub struct Row {
    /// The ONNX op type.
    pub(super) op: &'static str,
    /// Its kernel.
    pub(super) kernel: &'static dyn Kernel,
    /// Whether phantom claims the op whatever its domain: an ONNX op tract computes in f32, wrongly or not at all
    /// (the family's table says why), or one written in a domain neither ONNX's nor ORT's.
    pub(super) any_domain: bool,
}

impl Row {
    /// `op`, claimed in ORT's contrib domain (`com.microsoft`) and `ai.onnx.ml`.
    pub(super) const fn new(op: &'static str, kernel: &'static dyn Kernel) -> Row {
        Row {
            op,
            kernel,
            any_domain: false,
        }
    }

    /// `op`, claimed whatever its domain.
    pub(super) const fn any_domain(op: &'static str, kernel: &'static dyn Kernel) -> Row {
        Row {
            op,
            kernel,
            any_domain: true,
        }
    }
}
