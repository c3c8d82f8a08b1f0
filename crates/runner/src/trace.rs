//! Timed runs as targets report them for `phantom profile`: each run's time and its kernels (node, op, provider,
//! shapes, memory). ONNX Runtime's profiler output (a Chrome trace: an array of `X` events) is read here: each
//! `model_run` event, its executor time, and the `<node>_kernel_time` events inside it.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// One kernel's execution in one run.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// ONNX Runtime's node name (after its graph optimizations: fused or re-laid-out nodes get new names).
    pub node: String,
    pub op_type: String,
    pub provider: String,
    /// Microseconds since the profiler started.
    pub ts: u64,
    pub dur_us: u64,
    /// Element type and dims of each input and output (`("float", [1, 3, 224, 224])`).
    pub inputs: Vec<(String, Vec<u64>)>,
    pub outputs: Vec<(String, Vec<u64>)>,
    /// Bytes of the node's outputs, and of the arena in use at its peak, as ONNX Runtime reports them.
    pub output_bytes: u64,
    pub mem_peak: u64,
}

/// One `session.run`.
#[derive(Clone, Debug)]
pub struct Run {
    pub ts: u64,
    /// `model_run`: the whole call, input binding included.
    pub total_us: u64,
    /// `SequentialExecutor::Execute` (or the parallel executor's), when reported.
    pub executor_us: Option<u64>,
    pub kernels: Vec<Kernel>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    cat: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    ts: u64,
    #[serde(default)]
    dur: u64,
    #[serde(default)]
    args: Value,
}

/// The runs of a profile file's text, in order.
pub fn runs(text: &str) -> Result<Vec<Run>> {
    let events: Vec<Event> = serde_json::from_str(text).map_err(|e| Error::Ort {
        reason: format!("ONNX Runtime's profile is not the expected trace JSON: {e}"),
    })?;
    let mut runs: Vec<Run> = events
        .iter()
        .filter(|e| e.cat == "Session" && e.name == "model_run")
        .map(|e| Run {
            ts: e.ts,
            total_us: e.dur,
            executor_us: None,
            kernels: vec![],
        })
        .collect();
    runs.sort_by_key(|r| r.ts);
    let within = |runs: &mut [Run], ts: u64| -> Option<usize> {
        runs.iter()
            .position(|r| r.ts <= ts && ts <= r.ts + r.total_us)
    };
    for e in &events {
        if e.cat == "Session" && e.name.ends_with("Executor::Execute") {
            if let Some(i) = within(&mut runs, e.ts) {
                runs[i].executor_us = Some(e.dur);
            }
        } else if let (true, Some(node)) = (e.cat == "Node", e.name.strip_suffix("_kernel_time")) {
            if let Some(i) = within(&mut runs, e.ts) {
                runs[i].kernels.push(kernel(node, e));
            }
        }
    }
    for r in &mut runs {
        r.kernels.sort_by_key(|k| k.ts);
    }
    Ok(runs)
}

fn kernel(node: &str, e: &Event) -> Kernel {
    let s = |k: &str| e.args[k].as_str().unwrap_or_default().to_string();
    let n = |k: &str| e.args[k].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
    Kernel {
        node: node.to_string(),
        op_type: s("op_name"),
        provider: s("provider"),
        ts: e.ts,
        dur_us: e.dur,
        inputs: shapes(&e.args["input_type_shape"]),
        outputs: shapes(&e.args["output_type_shape"]),
        output_bytes: n("output_size"),
        mem_peak: n("mem_in_use_peak"),
    }
}

/// `[{"float": [1, 3]}, ...]` → `[("float", [1, 3]), ...]`.
fn shapes(v: &Value) -> Vec<(String, Vec<u64>)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_object()?.iter().next())
                .map(|(ty, dims)| {
                    let d = dims
                        .as_array()
                        .map(|d| d.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default();
                    (ty.clone(), d)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernels_are_assigned_to_the_run_they_fall_in() {
        let text = r#"[
          {"cat":"Session","name":"model_run","ts":100,"dur":50,"ph":"X","args":{}},
          {"cat":"Session","name":"SequentialExecutor::Execute","ts":101,"dur":45,"ph":"X","args":{}},
          {"cat":"Node","name":"conv_kernel_time","ts":102,"dur":30,"ph":"X","args":{"op_name":"Conv",
           "provider":"CPUExecutionProvider","input_type_shape":[{"float":[1,3,8,8]},{"float":[4,3,3,3]}],
           "output_type_shape":[{"float":[1,4,6,6]}],"output_size":"576","mem_in_use_peak":"1000"}},
          {"cat":"Node","name":"conv_fence_before","ts":102,"dur":0,"ph":"X","args":{}},
          {"cat":"Session","name":"model_run","ts":200,"dur":40,"ph":"X","args":{}},
          {"cat":"Node","name":"conv_kernel_time","ts":205,"dur":20,"ph":"X","args":{"op_name":"Conv"}}
        ]"#;
        let runs = super::runs(text).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].executor_us, Some(45));
        assert_eq!(runs[0].kernels.len(), 1);
        let k = &runs[0].kernels[0];
        assert_eq!(
            (k.node.as_str(), k.op_type.as_str(), k.dur_us),
            ("conv", "Conv", 30)
        );
        assert_eq!(k.inputs[1], ("float".to_string(), vec![4, 3, 3, 3]));
        assert_eq!((k.output_bytes, k.mem_peak), (576, 1000));
        assert_eq!(runs[1].kernels[0].dur_us, 20);
    }
}
