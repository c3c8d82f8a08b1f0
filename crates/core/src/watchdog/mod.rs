//! `--timeout`: a stage that cannot finish (a type inference that loops, a `Loop` with 10¹⁵ iterations, a driver
//! that hangs) is stopped by a watchdog thread. Engines cannot be interrupted from outside, so at the deadline the
//! watchdog prints one error naming the stage and the node being evaluated and ends the process with exit code 2;
//! files are only ever written atomically, so nothing half-written is left behind.

mod crash;

pub use crash::catch as catch_crashes;

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default limit of a whole command, generous for the slowest real models measured (an IS-Net at 1024² in
/// fp16 took 674 s).
pub const DEFAULT_TIMEOUT_S: u64 = 3600;

/// The stage, engine and node the process is in, for the watchdog's message.
static WHERE: Mutex<[String; 3]> = Mutex::new([String::new(), String::new(), String::new()]);

fn set(slot: usize, name: &str) {
    if let Ok(mut w) = WHERE.lock() {
        for s in w.iter_mut().skip(slot) {
            s.clear();
        }
        w[slot].push_str(name);
    }
}

/// Records the pipeline stage the process enters.
pub fn stage(name: &str) {
    set(0, name);
}

/// Records the engine a stage runs (`the f64 reference (tract)`, `ONNX Runtime`, `the wgpu target`).
pub fn engine(name: &str) {
    set(1, name);
}

/// Records the node an engine starts evaluating.
pub fn node(name: &str) {
    set(2, name);
}

/// Starts the watchdog: after `limit` (none when zero) the process ends with exit code 2.
pub fn arm(limit: Duration) {
    if limit.is_zero() {
        return;
    }
    let started = Instant::now();
    std::thread::spawn(move || {
        while started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50).min(limit));
        }
        let [stage, engine, node] = WHERE.lock().map(|w| w.clone()).unwrap_or_default();
        let stage = if stage.is_empty() {
            "start-up".to_string()
        } else {
            stage
        };
        let engine = if engine.is_empty() {
            String::new()
        } else {
            format!(", in {engine}")
        };
        let node = if node.is_empty() {
            String::new()
        } else {
            format!(", at node `{node}`")
        };
        eprintln!(
            "error: phantom did not finish within --timeout {}s: stopped in stage \"{stage}\"{engine}{node}\n  hint: a model \
             that makes an engine loop (an out-of-range attribute, a huge Loop trip count) is the usual cause; if \
             the model is just slow, raise --timeout (0 turns it off)",
            limit.as_secs()
        );
        std::process::exit(2);
    });
}
