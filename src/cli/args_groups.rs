//! Argument groups flattened into several commands, declared once.

use std::path::PathBuf;

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

/// The files a report is written as: the same four flags in every command that writes a report (`onnx`, `merge`,
/// `diff`). Each takes a file path.
#[derive(Debug, Clone, Default, Args)]
pub struct ReportArgs {
    /// Write the JSON report here.
    #[arg(long, value_name = "OUT.json")]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML file: a test case per output and per failing value.
    #[arg(long, value_name = "OUT.xml")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary (for CI logs and pull requests).
    #[arg(long = "summary-md", alias = "markdown", value_name = "OUT.md")]
    pub summary_md: Option<PathBuf>,
    /// Write a self-contained HTML report (open it anywhere, attach it to a bug).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

impl ReportArgs {
    /// Where the emitter writes each format.
    pub fn outputs(&self) -> crate::report::emit::Outputs<'_> {
        crate::report::emit::Outputs {
            json: self.json.as_deref(),
            junit: self.junit.as_deref(),
            markdown: self.summary_md.as_deref(),
            html: self.html.as_deref(),
        }
    }

    /// Each file flag with its name, for the checks before anything is written.
    pub fn named(&self) -> [(&'static str, &Option<PathBuf>); 4] {
        [
            ("--json", &self.json),
            ("--junit", &self.junit),
            ("--summary-md", &self.summary_md),
            ("--html", &self.html),
        ]
    }
}
