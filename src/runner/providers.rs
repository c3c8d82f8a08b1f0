//! ONNX Runtime execution providers phantom can target: one table, one entry per provider. Adding a provider is
//! one entry here (and the `ort` feature that compiles its registration in `Cargo.toml`).
//!
//! Every provider is registered with `error_on_failure`: a provider that cannot load is an error naming what to
//! install, never a silent fallback to the CPU.

use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider, ExecutionProviderDispatch};

/// Builds a provider's registration from `--ep-option KEY=VALUE` pairs.
type Build = fn(&[(String, String)]) -> Result<ExecutionProviderDispatch, String>;

/// One execution provider.
pub struct Provider {
    /// What `--ep` takes (`cuda`).
    pub cli: &'static str,
    /// ONNX Runtime's name (`CUDAExecutionProvider`), as `phantom runtimes` lists it.
    pub ort_name: &'static str,
    /// Registration; `None` for the CPU provider, which every session has.
    build: Option<Build>,
    /// What to install when the loaded ONNX Runtime lacks the provider or its libraries.
    pub install: &'static str,
}

/// Providers whose options are free-form key/value pairs (ONNX Runtime's provider options).
fn configurable<E>(options: &[(String, String)]) -> Result<ExecutionProviderDispatch, String>
where
    E: Default + ArbitrarilyConfigurableExecutionProvider + Into<ExecutionProviderDispatch>,
{
    let mut e = E::default();
    for (k, v) in options {
        e = e.with_arbitrary_config(k, v);
    }
    Ok(e.into())
}

/// Providers that `ort` registers through a fixed C entry point: no provider options.
fn fixed<E>(options: &[(String, String)]) -> Result<ExecutionProviderDispatch, String>
where
    E: Default + Into<ExecutionProviderDispatch>,
{
    match options.first() {
        Some((k, _)) => Err(format!(
            "this provider takes no --ep-option through phantom (got `{k}`)"
        )),
        None => Ok(E::default().into()),
    }
}

const PIP_GPU: &str = "`pip install onnxruntime-gpu` (ONNX Runtime built with CUDA; its CUDA 13 and cuDNN 9 \
     libraries come as the pip packages it depends on, under site-packages/nvidia/, where phantom finds them), then \
     run phantom with that Python environment active or --ort-lib pointing at its capi/libonnxruntime.so";

/// Every provider, in the order `phantom runtimes` and `--help` list them.
pub static PROVIDERS: &[Provider] = &[
    Provider {
        cli: "cpu",
        ort_name: "CPUExecutionProvider",
        build: None,
        install: "every ONNX Runtime build has it",
    },
    Provider {
        cli: "cuda",
        ort_name: "CUDAExecutionProvider",
        build: Some(configurable::<ep::CUDA>),
        install: PIP_GPU,
    },
    Provider {
        cli: "tensorrt",
        ort_name: "TensorrtExecutionProvider",
        build: Some(configurable::<ep::TensorRT>),
        install: "`pip install onnxruntime-gpu tensorrt-cu13` (TensorRT's libnvinfer must be on the library path \
                  as well as CUDA's; see the CUDA provider)",
    },
    Provider {
        cli: "rocm",
        ort_name: "ROCMExecutionProvider",
        build: Some(configurable::<ep::ROCm>),
        install: "`pip install onnxruntime-rocm` on a machine with ROCm installed",
    },
    Provider {
        cli: "migraphx",
        ort_name: "MIGraphXExecutionProvider",
        build: Some(fixed::<ep::MIGraphX>),
        install: "`pip install onnxruntime-migraphx` on a machine with ROCm and MIGraphX installed",
    },
    Provider {
        cli: "openvino",
        ort_name: "OpenVINOExecutionProvider",
        build: Some(configurable::<ep::OpenVINO>),
        install: "`pip install onnxruntime-openvino` (it bundles OpenVINO's runtime)",
    },
    Provider {
        cli: "directml",
        ort_name: "DmlExecutionProvider",
        build: Some(fixed::<ep::DirectML>),
        install: "`pip install onnxruntime-directml` on Windows 10 or later",
    },
    Provider {
        cli: "coreml",
        ort_name: "CoreMLExecutionProvider",
        build: Some(configurable::<ep::CoreML>),
        install: "the standard `pip install onnxruntime` wheel on macOS (Apple silicon or x86-64)",
    },
    Provider {
        cli: "qnn",
        ort_name: "QNNExecutionProvider",
        build: Some(configurable::<ep::QNN>),
        install: "`pip install onnxruntime-qnn` on a Snapdragon device (Windows on ARM or Android)",
    },
    Provider {
        cli: "webgpu",
        ort_name: "WebGpuExecutionProvider",
        build: Some(configurable::<ep::WebGPU>),
        install: "an ONNX Runtime built with --use_webgpu (the PyPI `onnxruntime` wheels do not include it)",
    },
    Provider {
        cli: "xnnpack",
        ort_name: "XnnpackExecutionProvider",
        build: Some(configurable::<ep::XNNPACK>),
        install: "an ONNX Runtime built with --use_xnnpack (onnxruntime-android / onnxruntime-mobile include it)",
    },
];

impl Provider {
    /// The provider `--ep NAME` names (case-insensitive; ONNX Runtime's own names are accepted too).
    pub fn find(name: &str) -> Option<&'static Provider> {
        let n = name.trim().to_ascii_lowercase();
        PROVIDERS
            .iter()
            .find(|p| p.cli == n || p.ort_name.to_ascii_lowercase() == n)
    }

    /// The `--ep` names, for help texts and errors.
    pub fn names() -> Vec<&'static str> {
        PROVIDERS.iter().map(|p| p.cli).collect()
    }

    /// The registration to add to a session (`None` for the CPU provider), failing loudly when it cannot load.
    pub fn dispatch(
        &self,
        options: &[(String, String)],
    ) -> Result<Option<ExecutionProviderDispatch>, String> {
        match self.build {
            None if !options.is_empty() => {
                Err("the CPU provider takes no provider options".to_string())
            }
            None => Ok(None),
            Some(b) => b(options).map(|d| Some(d.error_on_failure())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Provider, PROVIDERS};

    #[test]
    fn names_are_unique_and_found() {
        for p in PROVIDERS {
            assert!(std::ptr::eq(Provider::find(p.cli).unwrap(), p));
            assert!(std::ptr::eq(Provider::find(p.ort_name).unwrap(), p));
        }
        assert!(Provider::find("wgpu").is_none());
        assert!(Provider::find("CUDA").is_some());
    }

    #[test]
    fn options_are_refused_where_they_cannot_apply() {
        let opt = [("device_id".to_string(), "0".to_string())];
        assert!(Provider::find("cpu").unwrap().dispatch(&opt).is_err());
        assert!(Provider::find("migraphx").unwrap().dispatch(&opt).is_err());
        assert!(Provider::find("cuda").unwrap().dispatch(&opt).is_ok());
    }
}
