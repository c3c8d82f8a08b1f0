//! Whether the f64 reference can hold a model's weights within phantom's memory budget, checked before anything
//! is loaded: a model that cannot fit is an error that says how to cut it, not an abort when an allocation fails.

use super::Graph;
use crate::error::{Error, Result};
use crate::units::fmt_size;

/// Float weights of at least this many bytes (as stored) are kept as stored by the reference and widened to f64 as
/// each is used; smaller ones are widened up front.
pub const STORED_MIN_BYTES: usize = 64 << 10;

/// The weights of `graph` as the reference holds them ([`Graph::reference_weight_bytes`]) fit the memory budget.
pub fn weights_fit(graph: &Graph) -> Result<()> {
    fits(
        graph,
        graph.reference_weight_bytes(),
        "as the reference holds them (in f64, except weights of 64 KiB or more, kept as stored and widened one at a \
         time)",
    )
}

/// Every weight of `graph` widened to f64 up front fits the memory budget: what the reference needs when tract
/// cannot type the model with its weights kept as stored.
pub fn widened_weights_fit(graph: &Graph) -> Result<()> {
    fits(
        graph,
        graph.f64_weight_bytes(),
        "widened to f64 up front, as the reference needs them for this model (tract could not type it with its \
         weights kept as stored)",
    )
}

fn fits(graph: &Graph, bytes: u64, how: &str) -> Result<()> {
    let budget = crate::fsutil::memory_budget();
    if bytes <= budget as u64 {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: its weights take {} {how}, above phantom's memory budget of {} ({}): cut the model into segments that \
         each fit (`phantom plan {} -o PLAN --segment-memory {}`, then `phantom segment` and `phantom merge`), or \
         raise PHANTOM_MEMORY_BUDGET on a machine that has the memory",
        graph.path.display(),
        fmt_size(bytes.min(usize::MAX as u64) as usize),
        fmt_size(budget),
        budget_source(),
        graph.path.display(),
        fmt_size(budget).replace(' ', ""),
    )))
}

/// Where the budget comes from, for messages.
pub fn budget_source() -> &'static str {
    match std::env::var_os("PHANTOM_MEMORY_BUDGET") {
        Some(_) => "PHANTOM_MEMORY_BUDGET",
        None => "half this machine's memory, or of the process's memory limit where lower",
    }
}
