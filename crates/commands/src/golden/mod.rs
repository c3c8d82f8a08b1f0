//! Golden records: a small, per-value fingerprint of one run (hash, statistics, quantiles, a fixed sample of
//! elements with their indices), plus the inputs, options and environment that produced it. `phantom record`
//! writes one; `phantom check` runs again and compares value by value against drift budgets.

pub mod check;
pub mod render;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// Layout version of `golden.json`.
pub const GOLDEN_SCHEMA: &str = "phantom-golden/1";
/// Elements sampled per value.
pub const SAMPLES: usize = 16;

/// What produced the record; compared on `check` so changes are named beside the verdict.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    pub phantom_version: String,
    pub runtime: String,
    pub runtime_version: String,
    pub build_info: String,
    pub ep: String,
    pub ep_used: String,
    pub opt_level: String,
    pub model_sha256: String,
    pub os: String,
    pub cpu: String,
}

impl Provenance {
    /// From what a target ran (its typed facts).
    pub fn from_facts(
        runtime: &str,
        runtime_version: &str,
        facts: &crate::runner::facts::TargetFacts,
        model_sha256: &str,
    ) -> Provenance {
        let env = crate::pipeline::environment();
        Provenance {
            phantom_version: env!("CARGO_PKG_VERSION").into(),
            runtime: runtime.into(),
            runtime_version: runtime_version.into(),
            build_info: facts.build(),
            ep: facts.requested(),
            ep_used: facts.used(),
            opt_level: facts.opt_level(),
            model_sha256: model_sha256.into(),
            os: format!("{} {}", env.os, env.arch),
            cpu: env.cpu,
        }
    }
}

/// Fingerprint of one value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ValueRecord {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// FNV-1a of dtype, shape and bytes (see `analysis::determinism::hash`).
    pub hash: String,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
    /// 0, 1, 50, 99 and 100th percentiles of the finite elements.
    pub quantiles: [f64; 5],
    /// (flat index, value) at evenly spaced positions.
    pub sample: Vec<(usize, f64)>,
}

/// A whole golden record (`golden.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Golden {
    pub schema: String,
    pub model: String,
    pub provenance: Provenance,
    /// The command-line options of `phantom record` (input names are stored under `inputs/`).
    pub options: BTreeMap<String, String>,
    /// The target recorded, whole (absent in records of phantom before 0.1 targets).
    #[serde(default)]
    pub target: Option<crate::targets::TargetSpec>,
    pub inputs: Vec<String>,
    /// Model outputs saved in full under `outputs/` (with `--full-outputs`).
    pub full_outputs: Vec<String>,
    pub values: Vec<ValueRecord>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Fingerprints one tensor.
pub fn fingerprint(
    node_index: usize,
    node: &str,
    op_type: &str,
    value: &str,
    t: &Tensor,
) -> ValueRecord {
    let a = t.as_f64();
    let flat: Vec<f64> = a.iter().copied().collect();
    let mut finite: Vec<f64> = flat.iter().copied().filter(|v| v.is_finite()).collect();
    finite.sort_by(|x, y| x.partial_cmp(y).expect("finite"));
    let n = finite.len().max(1) as f64;
    let mean = finite.iter().sum::<f64>() / n;
    let std = (finite.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
    let step = (flat.len() / SAMPLES).max(1);
    let sample = (0..flat.len())
        .step_by(step)
        .take(SAMPLES)
        .map(|i| (i, flat[i]))
        .collect();
    ValueRecord {
        node_index,
        node: node.into(),
        op_type: op_type.into(),
        value: value.into(),
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
        hash: format!("{:016x}", crate::analysis::determinism::hash(t)),
        min: finite.first().copied().unwrap_or(0.0),
        max: finite.last().copied().unwrap_or(0.0),
        mean,
        std,
        quantiles: [0.0, 0.01, 0.5, 0.99, 1.0].map(|q| quantile(&finite, q)),
        sample,
    }
}

/// Writes `golden` with its inputs and full outputs into `dir` atomically (a sibling temp dir renamed into
/// place). An existing record is replaced only with `force`.
pub fn write(
    dir: &Path,
    golden: &Golden,
    inputs: &[(String, Tensor)],
    outputs: &[(String, Tensor)],
    force: bool,
) -> Result<u64> {
    crate::fsutil::write_dir_atomically(dir, force, "a golden record", |w| {
        for (k, (n, t)) in inputs.iter().enumerate() {
            w.write(
                &format!("inputs/input_{k}.pb"),
                &prost::Message::encode_to_vec(&crate::model::proto::tensor_to_proto(n, t)),
            )?;
        }
        for (k, (_, t)) in outputs.iter().enumerate() {
            w.write(
                &format!("outputs/output_{k}.npy"),
                &crate::model::npy::to_npy(t),
            )?;
        }
        w.write(
            "golden.json",
            &serde_json::to_vec(golden).expect("golden serializes"),
        )
    })
}

/// Reads and validates a golden record.
pub fn read(dir: &Path) -> Result<Golden> {
    let bad = |reason: String| {
        Error::Usage(format!(
            "{} is not a usable golden record: {reason}",
            dir.display()
        ))
    };
    let p = dir.join("golden.json");
    if !p.exists() {
        return Err(bad(
            "it has no golden.json (record one with `phantom record MODEL -o DIR`)".into(),
        ));
    }
    let text = std::fs::read(&p).map_err(|source| Error::Io {
        path: p.clone(),
        source,
    })?;
    let g: Golden = serde_json::from_slice(&text)
        .map_err(|e| bad(format!("golden.json is corrupt or truncated ({e})")))?;
    if g.schema != GOLDEN_SCHEMA {
        return Err(bad(format!(
            "it is `{}`, phantom reads `{GOLDEN_SCHEMA}`",
            g.schema
        )));
    }
    Ok(g)
}

/// The record's inputs, in order.
pub fn read_inputs(dir: &Path, g: &Golden) -> Result<Vec<(String, Tensor)>> {
    (0..g.inputs.len())
        .map(|k| {
            let p = dir.join("inputs").join(format!("input_{k}.pb"));
            if !p.exists() {
                return Err(Error::Usage(format!(
                    "{} is missing {}: the golden record is incomplete",
                    dir.display(),
                    p.display()
                )));
            }
            let (_, t) = crate::model::proto::read_tensor_pb(&p)?;
            Ok((g.inputs[k].clone(), t))
        })
        .collect()
}
