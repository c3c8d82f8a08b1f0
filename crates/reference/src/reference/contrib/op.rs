//! The tract side of a contrib kernel: an inference-time [`Expansion`] whose rules ask the kernel for its output
//! facts once the inputs' types and shapes are known, and the typed op it wires, which evaluates the kernel.

use std::sync::Arc;

use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;

use super::kernel::Kernel;
use super::kernel_for;
use super::node::{Fact, Node};
use super::symbolic::{self, SymFact};

/// Builds the tract op of a claimed node (registered under `phantom.<Op>`).
pub fn build(
    _ctx: &ParsingContext,
    proto: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let node = Node::new(proto);
    let k =
        kernel_for(node.op()).ok_or_else(|| anyhow!("phantom has no kernel for {}", node.op()))?;
    Ok((expand(ContribOp::new(node, k)), vec![]))
}

/// One contrib node, evaluated by phantom's f64 kernel.
#[derive(Clone)]
pub struct ContribOp {
    pub node: Arc<Node>,
    kernel: &'static dyn Kernel,
}

impl std::fmt::Debug for ContribOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.node.proto.op_type, self.node.proto.name)
    }
}

impl PartialEq for ContribOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.node, &other.node)
    }
}
impl Eq for ContribOp {}

impl ContribOp {
    fn new(node: Node, kernel: &'static dyn Kernel) -> ContribOp {
        ContribOp {
            node: Arc::new(node),
            kernel,
        }
    }

    /// The facts of the outputs tract exposes, from the facts of tract's inputs and the values tract knows of them
    /// (by tract input position; `None` where unknown).
    fn facts(&self, ins: &[Fact], values: &[Option<&Tensor>]) -> TractResult<Vec<Fact>> {
        let by_slot = self.node.by_slot(ins);
        let values: Vec<Option<&Tensor>> = (self.node.by_slot(values).into_iter())
            .map(|v| v.copied().flatten())
            .collect();
        let all = match self.kernel.value_slots().is_empty() {
            true => self.kernel.facts(&self.node, &by_slot),
            false => self.kernel.facts_valued(&self.node, &by_slot, &values),
        }
        .with_context(|| format!("typing {} `{}`", self.node.op(), self.node.proto.name))?;
        self.node
            .outs
            .iter()
            .map(|&o| {
                all.get(o)
                    .cloned()
                    .ok_or_else(|| anyhow!("{} has no output {o}", self.node.op()))
            })
            .collect()
    }

    /// Evaluates the kernel on tract's inputs and returns the outputs tract exposes, each in its fact's type.
    pub fn run(&self, inputs: &[TValue]) -> TractResult<TVec<TValue>> {
        self.run_with(&self.node, self.kernel, inputs)
    }

    /// For a stand-in of an op phantom has a kernel for ([`super::standin::original`]: a `Unique` or
    /// `NonMaxSuppression` whose output lengths only the data decides), that kernel evaluated in f64 on the run's
    /// concrete inputs, when its outputs have the shapes the stand-in declares (the target's); None otherwise, and
    /// the stand-in hands on the target's values.
    pub fn run_original(&self, inputs: &[TValue]) -> Option<TVec<TValue>> {
        let (node, kernel) = super::standin::original(&self.node)?;
        self.run_with(&node, kernel, inputs).ok()
    }

    /// `kernel` evaluated as `node` on tract's inputs, its outputs in the types and shapes this op declares.
    fn run_with(
        &self,
        node: &Node,
        kernel: &dyn Kernel,
        inputs: &[TValue],
    ) -> TractResult<TVec<TValue>> {
        let tensors: Vec<&Tensor> = inputs.iter().map(|v| &**v).collect();
        let by_slot: Vec<Option<&Tensor>> = (node.by_slot(&tensors).into_iter())
            .map(|t| t.copied())
            .collect();
        let facts: Vec<Fact> = inputs
            .iter()
            .map(|v| (v.datum_type(), v.shape().to_vec()))
            .collect();
        let want = self.facts(&facts, &by_tract(&tensors))?;
        let mut all = kernel.eval(node, &by_slot)?;
        self.node
            .outs
            .iter()
            .zip(want)
            .map(|(&o, (dt, shape))| {
                let t = std::mem::take(
                    all.get_mut(o)
                        .ok_or_else(|| anyhow!("{} computed no output {o}", node.op()))?,
                );
                ensure!(
                    t.shape() == shape.as_slice(),
                    "{} output {o} has shape {:?}, expected {shape:?}",
                    node.op(),
                    t.shape()
                );
                Ok(t.cast_to_dt(dt)?.into_owned().into_tvalue())
            })
            .collect()
    }
}

impl Op for ContribOp {
    fn name(&self) -> StaticName {
        self.node.proto.op_type.clone().into()
    }
    op_as_typed_op!();
}

impl EvalOp for ContribOp {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        self.run(&inputs)
    }
}

impl TypedOp for ContribOp {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let ins: Vec<SymFact> = (inputs.iter())
            .map(|f| (f.datum_type, f.shape.to_tvec()))
            .collect();
        let values: Vec<Option<&Tensor>> = inputs.iter().map(|f| f.konst.as_deref()).collect();
        Ok(self
            .sym_facts(&ins, &values)?
            .into_iter()
            .map(|(dt, shape)| dt.fact(shape))
            .collect())
    }

    as_op!();
}

impl ContribOp {
    /// The facts of [`ContribOp::facts`] for inputs whose shapes may hold symbolic dims (see [`symbolic`]).
    fn sym_facts(&self, ins: &[SymFact], values: &[Option<&Tensor>]) -> TractResult<Vec<SymFact>> {
        let facts = symbolic::facts(ins, |concrete| self.facts(concrete, values));
        if !symbolic::any(ins) {
            return facts;
        }
        facts.map_err(|e| {
            if self.lacks_values(values) {
                // Its outputs' shapes need input values only the run decides: no input dims would help.
                return e;
            }
            let shape = |s: &TVec<TDim>| s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("×");
            let shapes: Vec<String> = ins.iter().map(|(_, s)| shape(s)).collect();
            anyhow!(
                "{} `{}` needs concrete input shapes (got {}: {e}): give input dims with --dim/--shape",
                self.node.op(),
                self.node.proto.name,
                shapes.join(", "),
            )
        })
    }

    /// Whether an input whose value decides the outputs' shapes ([`Kernel::value_slots`]) is not known before the
    /// run (`values` by tract input position).
    fn lacks_values(&self, values: &[Option<&Tensor>]) -> bool {
        let by_slot = self.node.by_slot(values);
        (self.kernel.value_slots().iter()).any(|&k| matches!(by_slot.get(k), Some(Some(None))))
    }

    /// Sets the outputs' types and shapes in the solver to the kernel's facts.
    fn equate<'r>(
        &self,
        s: &mut Solver<'r>,
        outputs: &'r [TensorProxy],
        ins: &[SymFact],
        values: &[Option<&Tensor>],
    ) -> InferenceResult {
        for (o, (dt, shape)) in outputs.iter().zip(self.sym_facts(ins, values)?) {
            s.equals(&o.datum_type, dt)?;
            s.equals(&o.shape, ShapeFactoid::from(shape))?;
        }
        Ok(())
    }
}

/// Each tensor as a known value, by tract input position.
fn by_tract<'a>(tensors: &[&'a Tensor]) -> Vec<Option<&'a Tensor>> {
    tensors.iter().map(|t| Some(*t)).collect()
}

impl Expansion for ContribOp {
    fn name(&self) -> StaticName {
        self.node.proto.op_type.clone().into()
    }

    /// Folded while typing like any op, but not a stand-in for a node the reference cannot compute: its error
    /// belongs to the run, where it marks that node, not to typing, where it would stop the whole model.
    fn runs_out_of_plan(&self) -> bool {
        self.kernel.folds()
    }

    fn nboutputs(&self) -> TractResult<usize> {
        Ok(self.node.outs.len())
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_output_arity(outputs, self.node.outs.len())?;
        s.given_all(
            inputs.iter().map(|i| &i.datum_type),
            move |s, dts: Vec<DatumType>| {
                s.given_all(
                    inputs.iter().map(|i| &i.shape),
                    move |s, shapes: Vec<TVec<TDim>>| {
                        let ins: Vec<SymFact> = dts.iter().copied().zip(shapes).collect();
                        if self.kernel.value_slots().is_empty() {
                            return self.equate(s, outputs, &ins, &[]);
                        }
                        let valued: Vec<usize> = (self.kernel.value_slots().iter())
                            .filter_map(|&slot| self.node.slots.get(slot).copied().flatten())
                            .collect();
                        let proxies: Vec<_> = valued.iter().map(|&k| &inputs[k].value).collect();
                        s.given_all(proxies, move |s, known: Vec<Arc<Tensor>>| {
                            let mut values: Vec<Option<&Tensor>> = vec![None; ins.len()];
                            for (&k, t) in valued.iter().zip(&known) {
                                values[k] = Some(&**t);
                            }
                            self.equate(s, outputs, &ins, &values)
                        })
                    },
                )
            },
        )
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        model.wire_node(prefix, self.clone(), inputs)
    }
}
