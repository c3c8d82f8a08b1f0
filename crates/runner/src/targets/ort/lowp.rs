//! Builds the reduced-precision target model for ONNX Runtime: converts, asks ORT whether it loads, and keeps in
//! float32 the op types ORT says it has no kernel for (at most [`MAX_RETRIES`] times), so a model always loads
//! when ORT can run its float32 form.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::model::{self, external, Graph};
use crate::ort::OrtRunner;
use crate::precision::conversion::ConversionReport;
use crate::precision::convert::{convert, Conversion, ConvertOptions};
use crate::precision::LowPrecision;

/// Op types phantom will keep in float32 on ORT's word before giving up.
pub const MAX_RETRIES: usize = 24;

/// A converted target model ready for ONNX Runtime.
pub struct LowTarget {
    pub precision: LowPrecision,
    pub graph: Graph,
    pub conversion: Conversion,
    /// Op types kept in float32 because ORT has no kernel for them at this precision.
    pub kept_for_ort: Vec<String>,
    /// Where the converted weights are when the model keeps its weights in external data; removed when dropped.
    pub data_dir: Option<tempfile::TempDir>,
}

/// A fresh directory for a converted model's data, under phantom's spill root.
fn data_dir() -> Result<tempfile::TempDir> {
    let root = crate::spill::root();
    tempfile::Builder::new()
        .prefix("phantom-converted-")
        .tempdir_in(&root)
        .map_err(|e| Error::Write {
            path: root.clone(),
            reason: format!("cannot make a directory for the converted model's weights: {e}"),
        })
}

/// The op type in ORT's "Could not find an implementation for Op(13) node with name '...'" or "Type Error: Type
/// 'tensor(bfloat16)' of input parameter (x) of operator (Conv) in node (c) is invalid" message.
fn missing_kernel(msg: &str) -> Option<String> {
    let at = msg
        .find("Could not find an implementation for ")
        .map(|i| i + 37)
        .or_else(|| msg.find("of operator (").map(|i| i + 13))?;
    let op: String = msg[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!op.is_empty()).then_some(op)
}

/// Ops ORT may expand into their ONNX function bodies when it has no kernel for the type; an error naming an op
/// of the body (often with an empty node name) is fixed by keeping these whole.
const FUNCTION_OPS: &[&str] = &[
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "GroupNormalization",
    "Gelu",
    "MeanVarianceNormalization",
    "HardSwish",
    "Mish",
    "Celu",
];

/// Converts `graph` as `opts` says and makes sure `ort` loads it.
pub fn build(graph: &Graph, mut opts: ConvertOptions, ort: &OrtRunner) -> Result<LowTarget> {
    let mut proto = crate::model::import::decode(graph.bytes.as_slice()).map_err(|e| {
        Error::MalformedModel {
            path: graph.path.clone(),
            reason: format!("not an ONNX model: {e}"),
        }
    })?;
    model::optional::declare_unwrapped(&mut proto, &graph.bytes);
    let suffix = match opts.to {
        LowPrecision::F16 => "fp16",
        LowPrecision::Bf16 => "bf16",
    };
    let path = PathBuf::from(format!(
        "{}.{suffix}.onnx",
        graph.path.with_extension("").display()
    ));
    // A model with external data may be too large to encode whole once converted: its converted weights go to a
    // data file of their own, in a directory phantom owns for the run.
    let data_dir = match graph.initializers.values().any(|i| i.external) {
        true => Some(data_dir()?),
        false => None,
    };
    let path = match &data_dir {
        Some(d) => d.path().join(path.file_name().unwrap_or_default()),
        None => path,
    };
    let mut kept_for_ort: Vec<String> = vec![];
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        let mut conversion = convert(&proto, graph.path.parent(), &opts)?;
        if data_dir.is_some() {
            external::externalize(&mut conversion.model, graph.path.parent(), &path)?;
        }
        let mut low = model::surgery::finish_like(&path, conversion.model.clone(), graph)?;
        low.handed_on = graph.handed_on.clone();
        match ort.check_loads(&low) {
            Ok(()) => {
                return Ok(LowTarget {
                    precision: opts.to,
                    graph: low,
                    conversion,
                    kept_for_ort,
                    data_dir,
                })
            }
            Err(e) => {
                let msg = e.to_string();
                let in_model = |op: &str| graph.nodes.iter().any(|n| n.op_type == op);
                let expanded: Vec<String> = FUNCTION_OPS
                    .iter()
                    .filter(|op| in_model(op) && !opts.keep_ops.contains(**op))
                    .map(|s| s.to_string())
                    .collect();
                match missing_kernel(&msg) {
                    Some(op)
                        if kept_for_ort.len() < MAX_RETRIES && in_model(&op) && seen.insert(op.clone()) =>
                    {
                        opts.keep_ops.insert(op.clone());
                        kept_for_ort.push(op);
                    }
                    Some(_) if kept_for_ort.len() < MAX_RETRIES && !expanded.is_empty() => {
                        for op in expanded {
                            opts.keep_ops.insert(op.clone());
                            kept_for_ort.push(op);
                        }
                    }
                    _ => {
                        return Err(Error::Ort {
                            reason: format!(
                                "ONNX Runtime cannot load the {suffix} conversion of {}: {msg}\n  hint: keep the node \
                                 it names in float32 with --keep-fp32 NODE, or save the model with \
                                 --save-target-model and inspect it",
                                graph.path.display()
                            ),
                        })
                    }
                }
            }
        }
    }
}

impl LowTarget {
    /// What this conversion did, for the report.
    pub fn report(&self) -> ConversionReport {
        let low = self;
        let c = &low.conversion;
        ConversionReport {
            precision: low.precision,
            kept_fp32: c.kept.clone(),
            kept_for_ort: low.kept_for_ort.clone(),
            range_issues: c.range_issues.clone(),
            converted_tensors: c.converted_tensors,
            inserted_casts: c.inserted_casts,
            sha256: low.graph.sha256.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_op_without_a_kernel() {
        let msg = "Could not find an implementation for ConvTranspose(11) node with name 'up1'";
        assert_eq!(super::missing_kernel(msg).as_deref(), Some("ConvTranspose"));
        assert_eq!(super::missing_kernel("other error"), None);
    }
}
