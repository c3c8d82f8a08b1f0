//! Values another thread is computing, taken as they arrive: the expected-noise run's, computed beside the
//! reference that is compared as it streams (the paired runs of `runner::reference`). A value is taken once the run
//! has handed it over (or could not compute it), or once the run has ended; taking one that has not arrived yet
//! waits for it. Values wait in a [`Held`] store: in memory, or on disk when the run is bounded.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Held;
use crate::error::Error;
use crate::tensor::Tensor;

/// A run's values, arriving from its thread.
pub struct Arrivals {
    state: Mutex<State>,
    arrived: Condvar,
    started: Instant,
}

struct State {
    held: Held,
    /// Every value the run handed over, computed or not.
    seen: HashSet<String>,
    /// Set when the run has ended: its error, if it failed (or a value could not be kept).
    ended: Option<Option<String>>,
    /// The first value that could not be kept.
    failed: Option<String>,
    /// How long the run took.
    took: Duration,
}

/// What a run's arrivals came to once it ended.
pub struct Arrived {
    pub held: Held,
    /// Why the run failed, if it did.
    pub error: Option<Error>,
    /// How long it ran, in milliseconds.
    pub ms: f64,
}

impl Arrivals {
    /// Values to be kept in `held` as they arrive.
    pub fn new(held: Held) -> Arrivals {
        Arrivals {
            state: Mutex::new(State {
                held,
                seen: HashSet::new(),
                ended: None,
                failed: None,
                took: Duration::ZERO,
            }),
            arrived: Condvar::new(),
            started: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run handed over `name`: `value` is kept unless it is `None` (not a value to keep, or not computed).
    pub fn put(&self, name: &str, value: Option<Tensor>) {
        let mut s = self.lock();
        if let (Some(v), None) = (value, &s.failed) {
            if let Err(e) = s.held.insert(name, v) {
                s.failed = Some(format!("keeping `{name}`: {e}"));
            }
        }
        s.seen.insert(name.to_string());
        drop(s);
        self.arrived.notify_all();
    }

    /// The run has ended (`error`: why it failed): nothing more arrives.
    pub fn end(&self, error: Option<&Error>) {
        let mut s = self.lock();
        s.ended = Some(error.map(|e| e.to_string()));
        s.took = self.started.elapsed();
        drop(s);
        self.arrived.notify_all();
    }

    /// The state once `name` has arrived (or the run has ended).
    fn arrived(&self, name: &str) -> MutexGuard<'_, State> {
        let mut s = self.lock();
        while !s.seen.contains(name) && s.ended.is_none() {
            s = self.arrived.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s
    }

    /// Gives `name` up once it has arrived (or the run has ended): the value, when the run kept one.
    pub fn take(&self, name: &str) -> Option<Tensor> {
        self.arrived(name).held.take(name)
    }

    /// Reads `name` without giving it up, once it has arrived.
    pub fn read<T>(&self, name: &str, f: impl FnOnce(&Held) -> T) -> T {
        f(&self.arrived(name).held)
    }

    /// Bytes kept in memory and spilled to disk so far (None when the values wait in memory only).
    pub fn spilled_bytes(&self) -> Option<super::Kept> {
        self.lock().held.spilled_bytes()
    }

    /// The store and the run's outcome, once it has ended (`None` if it never did).
    pub fn finished(self) -> Option<Arrived> {
        let s = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        let error = s.ended?.or(s.failed).map(Error::Usage);
        Some(Arrived {
            held: s.held,
            error,
            ms: s.took.as_secs_f64() * 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn value(x: f64) -> Tensor {
        Tensor::F64(ndarray::arr1(&[x]).into_dyn())
    }

    #[test]
    fn a_value_is_taken_once_it_arrives_and_nothing_waits_after_the_end() {
        let a = Arc::new(Arrivals::new(Held::default()));
        let producer = {
            let a = a.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                a.put("x", Some(value(1.5)));
                a.put("skipped", None);
                std::thread::sleep(Duration::from_millis(30));
                a.end(Some(&Error::Usage("boom".into())));
            })
        };
        // Waits for `x`, then for the end before saying `never` did not come.
        assert_eq!(a.take("x").map(|t| t.to_f64_array()[0]), Some(1.5));
        assert!(a.take("skipped").is_none());
        assert!(a.take("never").is_none());
        producer.join().unwrap();
        let done = Arc::try_unwrap(a).ok().unwrap().finished().unwrap();
        assert_eq!(done.error.map(|e| e.to_string()).as_deref(), Some("boom"));
        assert!(done.ms >= 50.0, "{} ms", done.ms);
    }
}
