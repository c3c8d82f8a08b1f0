//! Where a plan keeps its files: the inputs, each side's boundary values and the partial reports, all plain files
//! (`.npy`, JSON) that a shared filesystem or an object store can hold.
//!
//! ```text
//! PLAN/plan.json
//! PLAN/inputs/<k>.npy                      graph input k
//! PLAN/boundary/<side>/s<I>_<k>.npy        segment I's k-th boundary output; side: reference, noise, target
//! PLAN/reports/segment-<I>.cbor            segment I's partial report (CBOR keeps NaN and infinities)
//! ```

use std::path::{Path, PathBuf};

use super::{Plan, Segment};
use crate::error::{Error, Result};
use crate::model::inputs::{InputSummary, Inputs};
use crate::model::npy;
use crate::tensor::Tensor;

/// The three runs whose boundary values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The f64 reference.
    Reference,
    /// The reference rerun with the target's rounding (expected noise), in f64.
    Noise,
    /// The target, in its own element type.
    Target,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Reference => "reference",
            Side::Noise => "noise",
            Side::Target => "target",
        }
    }
}

pub fn input_file(k: usize) -> String {
    format!("inputs/{k}.npy")
}

fn boundary_path(dir: &Path, side: Side, segment: usize, k: usize) -> PathBuf {
    dir.join("boundary")
        .join(side.name())
        .join(format!("s{segment}_{k}.npy"))
}

pub fn report_path(dir: &Path, segment: usize) -> PathBuf {
    dir.join("reports").join(format!("segment-{segment}.cbor"))
}

/// The stored graph inputs, in the plan's order.
pub fn read_inputs(dir: &Path, plan: &Plan) -> Result<Inputs> {
    let mut out = Inputs::default();
    for i in &plan.inputs {
        let t = npy::read_npy(&dir.join(&i.file))?;
        out.summaries.push(InputSummary {
            name: i.name.clone(),
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            origin: i.origin.clone(),
            dims_from: vec![],
            non_finite: crate::model::inputs::non_finite(&t),
        });
        out.tensors.push((i.name.clone(), t));
    }
    Ok(out)
}

/// Boundary value `name`, computed by segment `from`, as `side` stored it.
pub fn read_boundary(
    dir: &Path,
    plan: &Plan,
    side: Side,
    name: &str,
    from: usize,
) -> Result<Tensor> {
    let seg = plan.segment(from)?;
    let k = position(seg, name)?;
    let path = boundary_path(dir, side, from, k);
    if !path.exists() {
        return Err(Error::Usage(format!(
            "the {} value of `{name}` (computed by segment {from}) is not stored at {}: run `phantom segment {} \
             --boundary --index {from}` first (the boundary pass runs the segments in order)",
            side.name(),
            path.display(),
            dir.display()
        )));
    }
    npy::read_npy(&path)
}

/// Stores segment `seg`'s boundary output `name` as `side` computed it (written whole, then renamed into place).
pub fn write_boundary(dir: &Path, side: Side, seg: &Segment, name: &str, t: &Tensor) -> Result<()> {
    let path = boundary_path(dir, side, seg.index, position(seg, name)?);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| crate::fsutil::write_error(parent, e))?;
    }
    crate::report::json::write_atomic(&path, &npy::to_npy(t))
}

fn position(seg: &Segment, name: &str) -> Result<usize> {
    seg.hands_on.iter().position(|h| h == name).ok_or_else(|| {
        Error::Usage(format!(
            "segment {} hands on no value `{name}`: the plan is inconsistent; run `phantom plan` again",
            seg.index
        ))
    })
}
