//! Pieces of the pipeline: progress spinners, timings, the machine's facts, heatmap pruning.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::MAX_HEATMAPS;
use crate::report::model::Environment;

pub(super) fn stage(progress: bool, msg: &str) -> ProgressBar {
    crate::watchdog::stage(msg);
    if !progress {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template"),
    );
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

pub(super) fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Facts about this machine for the report.
pub fn environment() -> Environment {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Environment {
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpu,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    }
}

/// Keeps the heatmaps of the [`MAX_HEATMAPS`] values that use most of their tolerance (NaN/Inf mismatches first).
pub(super) fn prune_heatmaps(nodes: &mut [crate::report::model::NodeReport]) {
    let mut scored: Vec<(f64, usize, usize)> = vec![];
    for (i, n) in nodes.iter().enumerate() {
        for (k, v) in n.values.iter().enumerate() {
            if v.detail.as_ref().is_some_and(|d| d.heatmap.is_some()) {
                let m = v.metrics.as_ref();
                let score = match m {
                    Some(m) if m.nonfinite_mismatch > 0 => f64::INFINITY,
                    Some(m) => m.tolerance_used,
                    None => 0.0,
                };
                scored.push((score, i, k));
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    for &(_, i, k) in scored.iter().skip(MAX_HEATMAPS) {
        if let Some(d) = nodes[i].values[k].detail.as_mut() {
            d.heatmap = None;
        }
    }
}
