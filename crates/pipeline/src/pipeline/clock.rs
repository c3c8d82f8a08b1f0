//! The reference's time and the comparisons' by the op type that produced each value, as the values stream.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::report::model::OpTiming;

/// The reference's streamed time and the comparisons' by the op type that produced each value: the time since the
/// previous value arrived is the reference's, the time spent on the value before the next one starts the
/// comparison's.
pub(super) struct OpClock<'g> {
    op_of: HashMap<&'g str, &'g str>,
    last: Instant,
    pub(super) by_op: BTreeMap<String, OpTiming>,
    /// The reference ran ahead on its own thread ([`super::ahead`]).
    pub(super) ahead: bool,
}

impl<'g> OpClock<'g> {
    pub(super) fn new(g: &'g crate::model::Graph) -> OpClock<'g> {
        let op_of = g
            .nodes
            .iter()
            .flat_map(|n| {
                n.outputs
                    .iter()
                    .map(move |o| (o.as_str(), n.op_type.as_str()))
            })
            .collect();
        OpClock {
            op_of,
            last: Instant::now(),
            by_op: BTreeMap::new(),
            ahead: false,
        }
    }

    fn entry(&mut self, name: &str) -> &mut OpTiming {
        let op = self.op_of.get(name).copied().unwrap_or("(input)");
        self.by_op.entry(op.to_string()).or_default()
    }

    /// `name` arrived from the reference: the time it `spent` on it when it runs ahead on its own thread, else its
    /// time since the previous value, is the reference's. Returns now.
    pub(super) fn arrived(&mut self, name: &str, spent: Option<Duration>) -> Instant {
        let now = Instant::now();
        self.ahead |= spent.is_some();
        let since = spent.unwrap_or(now - self.last).as_secs_f64() * 1e3;
        let t = self.entry(name);
        t.values += 1;
        t.reference_ms += since;
        now
    }

    /// The reference's time since `t`: the time it spent on its values when it ran ahead on its own thread (the
    /// comparison overlapped it), else the time the comparison did not take.
    pub(super) fn reference_ms(&self, t: Instant, compare_time: Duration) -> f64 {
        match self.ahead {
            true => self.by_op.values().map(|o| o.reference_ms).sum(),
            false => (t.elapsed().saturating_sub(compare_time)).as_secs_f64() * 1e3,
        }
    }

    /// Done with `name`, which arrived at `at`; `compared`: the time went into comparing it (a bounded run
    /// spends it on the target's chunks instead, which are not this value's).
    pub(super) fn compared(&mut self, name: &str, at: Instant, compared: bool) {
        self.last = Instant::now();
        if compared {
            let spent = (self.last - at).as_secs_f64() * 1e3;
            self.entry(name).compare_ms += spent;
        }
    }
}
