//! What the user asked a target to be, resolved once from the command line: the engine (an ONNX Runtime execution
//! provider with its options, or phantom's wgpu shaders with theirs), the precision, and the model it runs. A serde
//! type, so `--save-run` stores it whole and `replay` reruns exactly it. The rules that need no runtime are here
//! ([`TargetSpec::check_combinations`]); `phantom-runner` adds the provider's own (`spec::check`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::facts::OptLevel;
use crate::precision::LowPrecision;
use crate::Named;

/// One target of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetSpec {
    pub engine: Engine,
    /// fp16/bf16: phantom's conversion of the model on ONNX Runtime; f16 shaders on wgpu. None: float32.
    pub precision: Option<LowPrecision>,
    /// `--target-model`: ONNX Runtime runs this model instead of the reference's; values matched by name.
    pub model: Option<PathBuf>,
}

/// The engine that computes the target's values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Engine {
    /// ONNX Runtime on one execution provider.
    Ort(OrtSpec),
    /// phantom's WGSL compute shaders through wgpu.
    Wgpu(WgpuSpec),
}

/// ONNX Runtime's options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrtSpec {
    /// The `--ep` name of an ONNX Runtime execution provider (`phantom runtimes` lists those it finds).
    pub provider: String,
    /// `--ep-option KEY=VALUE`: the provider's own options.
    pub options: BTreeMap<String, String>,
    pub opt_level: OptLevel,
    /// Nodes phantom's fp16/bf16 conversion keeps in float32 (`--keep-fp32`).
    pub keep_fp32: Vec<String>,
    /// ONNX Runtime's deterministic compute (`SetDeterministicCompute`).
    #[serde(default)]
    pub deterministic: bool,
}

/// The wgpu target's options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WgpuSpec {
    /// The adapter whose name contains this; default: the best there is.
    pub adapter: Option<String>,
    /// What sums (MatMul, Conv, reductions, normalizations) accumulate in.
    pub accumulate: Accumulate,
    pub f16_mode: F16Mode,
}

/// What the wgpu target's sums accumulate in.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Accumulate {
    #[default]
    F32,
    F16,
}

impl Named for Accumulate {
    const ALL: &'static [Accumulate] = &[Accumulate::F32, Accumulate::F16];

    fn name(self) -> &'static str {
        match self {
            Accumulate::F32 => "f32",
            Accumulate::F16 => "f16",
        }
    }
}

/// How f16 is computed when `--precision fp16` is asked for.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum F16Mode {
    /// Native when the adapter offers `SHADER_F16`, else emulated.
    #[default]
    Auto,
    Native,
    Emulated,
}

impl Named for F16Mode {
    const ALL: &'static [F16Mode] = &[F16Mode::Auto, F16Mode::Native, F16Mode::Emulated];

    fn name(self) -> &'static str {
        match self {
            F16Mode::Auto => "auto",
            F16Mode::Native => "native",
            F16Mode::Emulated => "emulated",
        }
    }
}

impl OrtSpec {
    /// ONNX Runtime on `provider` with default options.
    pub fn new(provider: &str) -> OrtSpec {
        OrtSpec {
            provider: provider.to_string(),
            options: BTreeMap::new(),
            opt_level: OptLevel::All,
            keep_fp32: vec![],
            deterministic: false,
        }
    }
}

impl Engine {
    /// The engine's name in reports: `onnxruntime`, `wgpu`.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Ort(_) => "onnxruntime",
            Engine::Wgpu(_) => "wgpu",
        }
    }

    /// ONNX Runtime's options, when this engine is ONNX Runtime.
    pub fn ort(&self) -> Option<&OrtSpec> {
        match self {
            Engine::Ort(o) => Some(o),
            Engine::Wgpu(_) => None,
        }
    }

    /// ONNX Runtime's options to change, when this engine is ONNX Runtime.
    pub fn ort_mut(&mut self) -> Option<&mut OrtSpec> {
        match self {
            Engine::Ort(o) => Some(o),
            Engine::Wgpu(_) => None,
        }
    }

    /// Whether a chunk of a bounded run reruns the whole model (wgpu) rather than running each node once in cuts
    /// (ONNX Runtime).
    pub fn chunks_rerun(&self) -> bool {
        matches!(self, Engine::Wgpu(_))
    }
}

impl TargetSpec {
    /// Whether the target's sums (MatMul, Conv, reductions) accumulate in float32 or wider: all but wgpu's
    /// `--accumulate f16`.
    pub fn sums_f32(&self) -> bool {
        !matches!(&self.engine, Engine::Wgpu(w) if w.accumulate == Accumulate::F16)
    }

    /// ONNX Runtime's CPU provider in float32: the default target.
    pub fn ort_cpu() -> TargetSpec {
        TargetSpec {
            engine: Engine::Ort(OrtSpec::new("cpu")),
            precision: None,
            model: None,
        }
    }

    /// A short name for columns and file names: `ort-cpu`, `ort-cuda-fp16`, `wgpu-f16`.
    pub fn label(&self) -> String {
        let base = match &self.engine {
            Engine::Ort(o) => format!("ort-{}", o.provider),
            Engine::Wgpu(_) => "wgpu".to_string(),
        };
        match (self.precision, &self.model) {
            (Some(LowPrecision::F16), _) => format!("{base}-fp16"),
            (Some(LowPrecision::Bf16), _) => format!("{base}-bf16"),
            (None, Some(_)) => format!("{base}-target-model"),
            (None, None) => base,
        }
    }

    /// Whether this is ONNX Runtime on execution provider `provider` (its `--ep` name).
    pub fn is_ort_on(&self, provider: &str) -> bool {
        self.engine.ort().is_some_and(|o| o.provider == provider)
    }

    /// Whether this is the wgpu target.
    pub fn is_wgpu(&self) -> bool {
        matches!(self.engine, Engine::Wgpu(_))
    }

    /// Refuses combinations no engine can honour, naming the option. The provider's name and options are checked
    /// where the providers are known (`phantom_runner::spec::check`, which calls this).
    pub fn check_combinations(&self) -> Result<()> {
        let usage = |m: &str| Err(Error::Usage(m.to_string()));
        match &self.engine {
            Engine::Ort(o) => {
                if !o.keep_fp32.is_empty() && self.precision.is_none() {
                    return usage("--keep-fp32 needs --precision fp16 or bf16");
                }
                if self.precision.is_some() && self.model.is_some() {
                    return usage(
                        "--precision converts MODEL for the target; --target-model gives the target its own model: \
                         choose one",
                    );
                }
            }
            Engine::Wgpu(w) => {
                if self.precision == Some(LowPrecision::Bf16) {
                    return usage(
                        "--ep wgpu computes in fp32 or fp16; bf16 is for ONNX Runtime targets",
                    );
                }
                if self.model.is_some() {
                    return usage(
                        "--ep wgpu runs MODEL itself (its shaders are the thing under test): --target-model is for \
                         ONNX Runtime targets",
                    );
                }
                if w.accumulate == Accumulate::F16 && self.precision != Some(LowPrecision::F16) {
                    return usage(
                        "--accumulate f16 needs --precision fp16 (in fp32 every sum is f32)",
                    );
                }
                if w.f16_mode != F16Mode::Auto && self.precision != Some(LowPrecision::F16) {
                    return usage("--f16-mode needs --precision fp16");
                }
            }
        }
        Ok(())
    }

    /// The same target with ONNX Runtime's graph optimizations off (to settle a fusion cause); None when it has
    /// none to turn off.
    pub fn unfused(&self) -> Option<TargetSpec> {
        match &self.engine {
            Engine::Ort(o) if o.opt_level != OptLevel::Disable => {
                let mut s = self.clone();
                if let Engine::Ort(o) = &mut s.engine {
                    o.opt_level = OptLevel::Disable;
                }
                Some(s)
            }
            _ => None,
        }
    }

    /// The same float32 target with TF32 tensor cores off (`use_tf32=0`), to settle whether TF32 causes a
    /// MatMul/Gemm/Conv culprit's error; None where TF32 is not in play: not ONNX Runtime's CUDA provider (the only
    /// one with the option), a converted fp16/bf16 model, or TF32 already off.
    pub fn without_tf32(&self) -> Option<TargetSpec> {
        let o = self.engine.ort()?;
        let off = o.options.get("use_tf32").is_some_and(|v| v == "0");
        if o.provider != "cuda" || off || self.precision.is_some() {
            return None;
        }
        let mut s = self.clone();
        if let Engine::Ort(o) = &mut s.engine {
            o.options.insert("use_tf32".into(), "0".into());
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_checks() {
        let mut s = TargetSpec::ort_cpu();
        assert_eq!(s.label(), "ort-cpu");
        s.check_combinations().unwrap();
        s.precision = Some(LowPrecision::F16);
        assert_eq!(s.label(), "ort-cpu-fp16");
        s.model = Some("x.onnx".into());
        assert!(s.check_combinations().is_err());
        let w = TargetSpec {
            engine: Engine::Wgpu(WgpuSpec {
                accumulate: Accumulate::F16,
                ..Default::default()
            }),
            precision: None,
            model: None,
        };
        assert!(w
            .check_combinations()
            .unwrap_err()
            .to_string()
            .contains("--accumulate"));
    }

    #[test]
    fn names_round_trip() {
        for l in OptLevel::ALL {
            assert_eq!(OptLevel::from_name(l.name()), Some(*l));
        }
        assert_eq!(F16Mode::from_name("emulated"), Some(F16Mode::Emulated));
        assert_eq!(Accumulate::from_name("f16"), Some(Accumulate::F16));
        assert_eq!(Accumulate::from_name("f64"), None);
    }

    #[test]
    fn round_trips_through_json() {
        let mut o = OrtSpec::new("cuda");
        o.options.insert("device_id".into(), "1".into());
        let s = TargetSpec {
            engine: Engine::Ort(o),
            precision: Some(LowPrecision::F16),
            model: None,
        };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<TargetSpec>(&j).unwrap(), s);
    }
}
