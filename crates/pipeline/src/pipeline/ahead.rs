//! The reference a little ahead of the comparison: the f64 run goes on its own thread and hands each value over a
//! queue, so it computes the next values while this thread compares the last ones (on two cores, the comparison
//! no longer stalls the reference). The values in the queue stay within [`AHEAD_BYTES`] (one value always goes,
//! whatever its size), and they arrive in the order the reference computed them. Each carries the time the
//! reference spent computing it, waits on a full queue excluded.
//!
//! Not where the comparison feeds the reference back: the target's discrete decisions widen to the noise the
//! comparison measures on their inputs before the reference takes them, so a run with decisions stays on one
//! thread ([`super::stream`]).

use std::sync::mpsc::sync_channel;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::runner::reference::Sink;
use crate::tensor::Tensor;

/// Bytes of values the reference may hold computed but not yet compared, at most (budgets under 8× this take an
/// eighth of theirs).
pub const AHEAD_BYTES: u64 = 64 << 20;

/// A value the reference computed, or why it could not.
pub type Value = std::result::Result<Tensor, String>;

/// A value handed over: its name, the value, and the time the reference spent computing it.
type Handed = (String, Value, Duration);

/// Where the comparison takes each value, with the time the reference spent on it.
pub type Timed<'s> = dyn FnMut(&str, Value, Duration) + 's;

/// The bytes in the queue, and the signal that some were taken.
struct Room {
    held: Mutex<u64>,
    taken: Condvar,
}

impl Room {
    /// Waits until `bytes` more fit under `cap` (or nothing is held), then counts them.
    fn enter(&self, bytes: u64, cap: u64) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held > 0 && *held + bytes > cap {
            held = (self.taken.wait(held)).unwrap_or_else(PoisonError::into_inner);
        }
        *held += bytes;
    }

    fn leave(&self, bytes: u64) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        *held -= bytes;
        self.taken.notify_one();
    }
}

/// Runs `reference` on a second thread, handing each value it gives its sink to `sink` on this one, with the time
/// the reference spent on it; `cap`: bytes of values the queue may hold. Returns what `reference` returned.
pub fn run<R: Send>(
    cap: u64,
    reference: impl FnOnce(&mut Sink<'_>) -> Result<R> + Send,
    sink: &mut Timed<'_>,
) -> Result<R> {
    let room = Room {
        held: Mutex::new(0),
        taken: Condvar::new(),
    };
    let (tx, rx) = sync_channel::<Handed>(256);
    std::thread::scope(|scope| {
        let room = &room;
        let thread = scope.spawn(move || {
            let mut last = Instant::now();
            let mut hand = |name: &str, value: Value| {
                let spent = last.elapsed();
                room.enter(bytes(&value), cap);
                // The comparison ended early (it panicked): the reference runs out without it.
                let _ = tx.send((name.to_string(), value, spent));
                last = Instant::now();
            };
            reference(&mut hand)
        });
        for (name, value, spent) in rx {
            let size = bytes(&value);
            sink(&name, value, spent);
            room.leave(size);
        }
        thread.join().unwrap_or_else(|_| {
            Err(Error::Usage(
                "the f64 reference's thread ended without a result".into(),
            ))
        })
    })
}

/// The bytes a handed value takes (an error: none).
fn bytes(value: &Value) -> u64 {
    value.as_ref().map_or(0, |t| t.nbytes() as u64)
}

/// The queue's cap under a memory budget (bounded runs): an eighth of it, at most [`AHEAD_BYTES`].
pub fn cap(budget: Option<usize>) -> u64 {
    budget.map_or(AHEAD_BYTES, |b| (b as u64 / 8).min(AHEAD_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values arrive in order, each once, and the reference's result comes back; a queue smaller than one value
    /// still passes each value.
    #[test]
    fn values_arrive_in_order_under_any_cap() {
        for cap in [1, 1 << 30] {
            let mut seen = vec![];
            let out = run(
                cap,
                |sink| {
                    for k in 0..50 {
                        let t = Tensor::F64(ndarray::ArrayD::from_elem(vec![k + 1], k as f64));
                        sink(&format!("v{k}"), Ok(t));
                    }
                    sink("bad", Err("no value".into()));
                    Ok(7)
                },
                &mut |name, value, _| seen.push((name.to_string(), value.map(|t| t.len()))),
            );
            assert_eq!(out.unwrap(), 7);
            assert_eq!(seen.len(), 51);
            assert!((0..50).all(|k| seen[k] == (format!("v{k}"), Ok(k + 1))));
            assert_eq!(seen[50].1, Err("no value".to_string()));
        }
    }
}
