//! Options that take one of a few names (`--ort-opt-level extended`, `--accumulate f16`): each lists its values
//! and their names once, and the command line builds its choices from that list.

/// A closed set of values, each with the name a flag takes.
pub trait Named: Copy + 'static {
    /// Every value, in the order help lists them.
    const ALL: &'static [Self];
    /// The name a flag takes and reports print.
    fn name(self) -> &'static str;
    /// The value named `s`.
    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
}
