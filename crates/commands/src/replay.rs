//! Replay directories (`phantom onnx --save-run DIR`, `phantom replay DIR`): the inputs in ONNX test_data_set
//! layout, the options, the model's sha256, the environment and the verdict, so a run can be reproduced and any
//! difference — verdict, environment, input — named.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::golden::Provenance;
use crate::pipeline::CompareSettings;
use crate::report::model::{NodeRef, Report, Status};
use crate::tensor::Tensor;

pub const RUN_SCHEMA: &str = "phantom-run/3";

/// `run.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SavedRun {
    pub schema: String,
    /// Absolute path of the reference model.
    pub model: String,
    pub model_sha256: String,
    pub target_model: Option<String>,
    /// Every setting of the run, whole (target, tolerances, slice, strategy, attribution); the inputs are the
    /// saved `test_data_set_0/`.
    pub settings: CompareSettings,
    pub environment: Provenance,
    /// Input name -> FNV-1a hash of its bytes, as saved.
    pub inputs: Vec<(String, String)>,
    pub status: Status,
    pub first_divergence: Option<NodeRef>,
    pub failing_values: usize,
}

impl SavedRun {
    pub fn from_report(
        r: &Report,
        settings: &CompareSettings,
        inputs: &[(String, Tensor)],
    ) -> SavedRun {
        let abs = |p: &str| {
            std::fs::canonicalize(p)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| p.to_string())
        };
        SavedRun {
            schema: RUN_SCHEMA.into(),
            model: abs(&r.model.path),
            model_sha256: r.model.sha256.clone(),
            target_model: r.target_model.as_ref().map(|t| abs(&t.path)),
            settings: {
                let mut s = settings.clone();
                s.model = abs(&r.model.path).into();
                for t in s.targets.iter_mut() {
                    t.model = t.model.take().map(|m| abs(&m.display().to_string()).into());
                }
                s.inputs = Default::default();
                s
            },
            environment: Provenance::from_facts(
                &r.target.name,
                &r.target.version,
                &r.target.details,
                &r.model.sha256,
            ),
            inputs: inputs
                .iter()
                .map(|(n, t)| {
                    (
                        n.clone(),
                        format!("{:016x}", crate::analysis::determinism::hash(t)),
                    )
                })
                .collect(),
            status: r.verdict.status,
            first_divergence: r.verdict.first_divergence.clone(),
            failing_values: r.verdict.failing_values,
        }
    }
}

/// Writes the replay directory atomically; an existing one is replaced only with `force`.
pub fn save(dir: &Path, run: &SavedRun, inputs: &[(String, Tensor)], force: bool) -> Result<()> {
    crate::fsutil::write_dir_atomically(dir, force, "a saved run", |w| {
        for (k, (n, t)) in inputs.iter().enumerate() {
            let pb = prost::Message::encode_to_vec(&crate::model::proto::tensor_to_proto(n, t));
            w.write(&format!("test_data_set_0/input_{k}.pb"), &pb)?;
        }
        w.write(
            "run.json",
            &serde_json::to_vec_pretty(run).expect("serializes"),
        )
    })
    .map(|_| ())
}

/// Reads `run.json` of a replay directory.
pub fn load(dir: &Path) -> Result<SavedRun> {
    let p = dir.join("run.json");
    let bad = |why: String| {
        Error::Usage(format!(
            "{} is not a phantom run directory: {why}",
            dir.display()
        ))
    };
    let bytes = std::fs::read(&p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            bad("it has no run.json (save one with `phantom onnx M --save-run DIR`)".into())
        }
        _ => bad(format!("cannot read its run.json: {e}")),
    })?;
    let run: SavedRun =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("run.json is corrupt ({e})")))?;
    if run.schema != RUN_SCHEMA {
        return Err(bad(format!(
            "it is `{}`, phantom reads `{RUN_SCHEMA}`",
            run.schema
        )));
    }
    Ok(run)
}
