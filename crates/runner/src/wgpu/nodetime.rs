//! Per-node wall times for the profile (`Gpu::node_times`): when each node started and how long it took, with the
//! shapes it read and wrote.

use super::ctx::Store;
use super::gpu::Gpu;
use crate::error::Result;
use crate::RunOutput;

/// The shapes of `names` as the store holds them (device or host; empty when absent).
pub(super) fn shapes_of(store: &Store, names: &[String]) -> Vec<Vec<usize>> {
    names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| match store.dev.get(n) {
            Some(v) => v.shape.clone(),
            None => store
                .host
                .get(n)
                .map(|t| t.shape().to_vec())
                .unwrap_or_default(),
        })
        .collect()
}

/// Waits for the device (a device node) and records the node's wall time from `t0`.
pub(super) fn record_time(
    gpu: &Gpu,
    (t0, run_start): (std::time::Instant, std::time::Instant),
    node: &crate::model::Node,
    on_device: bool,
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
    out: &RunOutput,
) -> Result<()> {
    if on_device {
        gpu.wait()?;
    }
    let outputs = match on_device {
        true => outputs,
        false => node
            .outputs
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| {
                out.values
                    .get(o)
                    .map(|t| t.shape().to_vec())
                    .unwrap_or_default()
            })
            .collect(),
    };
    let rec = super::gpu::NodeTime {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        on_device,
        start_us: (t0 - run_start).as_micros() as u64,
        dur_us: t0.elapsed().as_micros() as u64,
        inputs,
        outputs,
    };
    if let Some(v) = gpu.node_times.borrow_mut().as_mut() {
        v.push(rec);
    }
    Ok(())
}
