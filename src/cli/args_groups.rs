//! Argument groups flattened into several commands, declared once.

use clap::Args;

/// Tolerances for float values, the same two flags in every command that compares. Without them each value gets
/// the default of the precision it is judged in (f32: atol 1e-4, rtol 1e-3; f16: 1e-2; bf16: 5e-2), capped by its
/// operands' scale, and the expected rounding noise may excuse a failure; given, they are taken as they are.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ToleranceArgs {
    /// Absolute tolerance for float values [default: by the precision a value is judged in].
    #[arg(long)]
    pub atol: Option<f64>,
    /// Relative tolerance for float values [default: by the precision a value is judged in].
    #[arg(long)]
    pub rtol: Option<f64>,
}

impl ToleranceArgs {
    /// Refuses a tolerance that is negative or not finite.
    pub fn check(&self) -> anyhow::Result<()> {
        for (name, v) in [("--atol", self.atol), ("--rtol", self.rtol)] {
            if let Some(x) = v {
                super::settings::finite_non_negative(name, x)?;
            }
        }
        Ok(())
    }

    /// Sets the given tolerances on `spec` (after [`ToleranceArgs::check`]); its `computed_in` stays.
    pub fn apply(&self, spec: &mut crate::compare::ToleranceSpec) -> anyhow::Result<()> {
        self.check()?;
        spec.atol = self.atol;
        spec.rtol = self.rtol;
        Ok(())
    }
}
