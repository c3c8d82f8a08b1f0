//! `phantom precision`: the precision advisor's command line (`crate::advisor` runs the rounds); writes the
//! mixed-precision model and prints the nodes kept.

use super::out::sayln;
use anyhow::{bail, Context};

use super::args::PrecisionArgs;
use super::Outcome;
use crate::pipeline::CompareSettings;

pub fn run(a: PrecisionArgs) -> anyhow::Result<Outcome> {
    let Some(_) = a.precision.low() else {
        bail!("--precision fp32 needs no advice: choose fp16 or bf16");
    };
    if a.out.exists() && !a.force {
        bail!(
            "{}: already exists; pass --force to replace it",
            a.out.display()
        );
    }
    let target = super::target_flags::one("precision", &a.engine, a.precision, &[], None)?;
    if target.is_wgpu() {
        bail!(
            "phantom precision writes a mixed fp16/fp32 ONNX model for ONNX Runtime; --ep wgpu computes every node \
             in f16 and cannot keep nodes in fp32: choose an ONNX Runtime provider (--ep cpu, cuda, ...)"
        );
    }
    if a.max_rounds == 0 {
        bail!("--max-rounds must be at least 1");
    }
    let inputs = super::settings::input_spec(&a.inputs)?;
    let graph = crate::model::load(&a.model)?;
    let scratch = a.out.with_extension("phantom-partial.onnx");
    let mut settings = CompareSettings::new(a.model.clone(), target);
    a.tolerance.apply(&mut settings.tolerance)?;
    settings.inputs = inputs;
    settings.runtime = super::target_flags::runtime(&a.engine);
    settings.attribution = true;
    // The advisor ranks nodes by what each does alone.
    settings.attribute_all = true;
    settings.save_target_model = Some(scratch.clone());
    let advice =
        crate::advisor::advise(&settings, &graph, a.keep_fp32.clone(), a.max_rounds, |s| {
            sayln!("{s}")
        })?;
    let (keep, met) = (advice.kept, advice.met);
    std::fs::rename(&scratch, &a.out).with_context(|| format!("writing {}", a.out.display()))?;
    sayln!(
        "{} nodes kept in fp32{}{}",
        keep.len(),
        if keep.is_empty() { "" } else { ": " },
        keep.join(",")
    );
    sayln!("mixed-precision model: {}", a.out.display());
    if met {
        sayln!(
            "meets the tolerance (rerun: phantom onnx {} --precision {} --keep-fp32 '{}')",
            a.model.display(),
            format!("{:?}", a.precision).to_lowercase(),
            keep.join(",")
        );
        Ok(Outcome::Clean)
    } else {
        sayln!(
            "does NOT meet the tolerance after {} round(s)",
            a.max_rounds
        );
        Ok(Outcome::Diverged)
    }
}
