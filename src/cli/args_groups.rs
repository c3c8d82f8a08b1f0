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

/// Which model the target runs: MODEL, phantom's fp16/bf16 conversion of it, or another file; the same three
/// flags in every command that runs a target on a model.
#[derive(Debug, Clone, Args)]
pub struct ModelOnTarget {
    /// Run this model on the target instead (an optimized, converted or quantized version of MODEL); its values
    /// are paired with MODEL's by what they compute in f64 (by name where they pair with none, or it quantizes).
    #[arg(long, value_name = "OTHER.onnx")]
    pub target_model: Option<PathBuf>,
    /// With --target-model: pair values by name only (no f64 runs of the two models to pair them by value).
    #[arg(long, requires = "target_model")]
    pub pair_by_name: bool,
    /// Precision of the target: fp16/bf16 run phantom's conversion of MODEL (I/O types kept) on ONNX Runtime, f16
    /// shaders on wgpu.
    #[arg(
        long,
        value_enum,
        default_value = "fp32",
        conflicts_with = "target_model"
    )]
    pub precision: super::args::PrecisionArg,
    /// Keep this node in float32 in the fp16/bf16 conversion (repeat, or separate with commas).
    #[arg(long = "keep-fp32", value_name = "NODE", value_delimiter = ',')]
    pub keep_fp32: Vec<String>,
}

/// `--json [PATH]`, the same flag in every command that writes JSON: a file path, or `-` (or no path) for standard
/// output, where the command's own summary then goes to standard error.
#[derive(Debug, Clone, Default, Args)]
pub struct JsonOut {
    /// Write the JSON here (`-` or no PATH: standard output; the summary then goes to standard error).
    #[arg(id = "json", long = "json", value_name = "PATH", num_args = 0..=1, default_missing_value = "-")]
    pub path: Option<PathBuf>,
}

/// `--junit PATH`, the same flag in every command that writes JUnit XML.
#[derive(Debug, Clone, Default, Args)]
pub struct JunitOut {
    /// Write a JUnit XML file here, a test case per checked value (`-`: standard output).
    #[arg(id = "junit", long = "junit", value_name = "OUT.xml")]
    pub path: Option<PathBuf>,
}

/// The files a report is written as: the same four flags in every command that writes a report (`onnx`, `merge`,
/// `diff`). Each takes a file path, or `-` for standard output.
#[derive(Debug, Clone, Default, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub json: JsonOut,
    #[command(flatten)]
    pub junit: JunitOut,
    /// Write a Markdown summary (for CI logs and pull requests; `-`: standard output).
    #[arg(long = "summary-md", alias = "markdown", value_name = "OUT.md")]
    pub summary_md: Option<PathBuf>,
    /// Write a self-contained HTML report (open it anywhere, attach it to a bug; `-`: standard output).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

impl ReportArgs {
    /// Where the emitter writes each format.
    pub fn outputs(&self) -> crate::report::emit::Outputs<'_> {
        crate::report::emit::Outputs {
            json: self.json.path.as_deref(),
            junit: self.junit.path.as_deref(),
            markdown: self.summary_md.as_deref(),
            html: self.html.as_deref(),
        }
    }

    /// Each file flag with its name, for the checks before anything is written.
    pub fn named(&self) -> [(&'static str, &Option<PathBuf>); 4] {
        [
            ("--json", &self.json.path),
            ("--junit", &self.junit.path),
            ("--summary-md", &self.summary_md),
            ("--html", &self.html),
        ]
    }
}
