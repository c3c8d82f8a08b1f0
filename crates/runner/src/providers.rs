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
    /// For providers that also come as a plugin library ([`super::plugins`]): what the plugin needs to offer a
    /// device.
    pub plugin_needs: Option<&'static str>,
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

const WEBGPU_NEEDS: &str =
    "a GPU with a Vulkan (Linux), Metal (macOS) or D3D12 (Windows) driver, and on Linux \
     the Vulkan loader libvulkan.so.1 (lavapipe's software Vulkan is not offered)";

/// Every provider, in the order `phantom runtimes` and `--help` list them.
pub static PROVIDERS: &[Provider] = &[
    Provider {
        cli: "cpu",
        ort_name: "CPUExecutionProvider",
        build: None,
        install: "every ONNX Runtime build has it",
        plugin_needs: None,
    },
    Provider {
        cli: "cuda",
        ort_name: "CUDAExecutionProvider",
        build: Some(configurable::<ep::CUDA>),
        install: PIP_GPU,
        plugin_needs: None,
    },
    Provider {
        cli: "tensorrt",
        ort_name: "TensorrtExecutionProvider",
        build: Some(configurable::<ep::TensorRT>),
        install: "`pip install onnxruntime-gpu tensorrt-cu13` (TensorRT's libnvinfer must be on the library path \
                  as well as CUDA's; see the CUDA provider)",
        plugin_needs: None,
    },
    Provider {
        cli: "rocm",
        ort_name: "ROCMExecutionProvider",
        build: Some(configurable::<ep::ROCm>),
        install: "`pip install onnxruntime-rocm` on a machine with ROCm installed",
        plugin_needs: None,
    },
    Provider {
        cli: "migraphx",
        ort_name: "MIGraphXExecutionProvider",
        build: Some(fixed::<ep::MIGraphX>),
        install: "`pip install onnxruntime-migraphx` on a machine with ROCm and MIGraphX installed",
        plugin_needs: None,
    },
    Provider {
        cli: "openvino",
        ort_name: "OpenVINOExecutionProvider",
        build: Some(configurable::<ep::OpenVINO>),
        install: "`pip install onnxruntime-openvino` (it bundles OpenVINO's runtime), or the plugin \
                  `pip install onnxruntime-ep-openvino`",
        plugin_needs: Some("an Intel CPU, GPU or NPU that OpenVINO supports"),
    },
    Provider {
        cli: "directml",
        ort_name: "DmlExecutionProvider",
        build: Some(fixed::<ep::DirectML>),
        install: "`pip install onnxruntime-directml` on Windows 10 or later",
        plugin_needs: None,
    },
    Provider {
        cli: "coreml",
        ort_name: "CoreMLExecutionProvider",
        build: Some(configurable::<ep::CoreML>),
        install: "the standard `pip install onnxruntime` wheel on macOS (Apple silicon or x86-64)",
        plugin_needs: None,
    },
    Provider {
        cli: "qnn",
        ort_name: "QNNExecutionProvider",
        build: Some(configurable::<ep::QNN>),
        install: "`pip install onnxruntime-qnn` on a Snapdragon device (Windows on ARM or Android)",
        plugin_needs: None,
    },
    Provider {
        cli: "webgpu",
        ort_name: "WebGpuExecutionProvider",
        build: Some(configurable::<ep::WebGPU>),
        install: "`pip install onnxruntime-ep-webgpu` (a plugin library phantom finds in python3's packages and \
                  registers), or --ep-library webgpu=PATH, or an ONNX Runtime built with --use_webgpu",
        plugin_needs: Some(WEBGPU_NEEDS),
    },
    Provider {
        cli: "xnnpack",
        ort_name: "XnnpackExecutionProvider",
        build: Some(configurable::<ep::XNNPACK>),
        install: "an ONNX Runtime built with --use_xnnpack (onnxruntime-android / onnxruntime-mobile include it)",
        plugin_needs: None,
    },
    Provider {
        cli: "tensorrt-rtx",
        ort_name: "NvTensorRTRTXExecutionProvider",
        build: None,
        install: "`pip install onnxruntime-ep-nv-tensorrt-rtx-cu13` (a plugin library), or --ep-library \
                  tensorrt-rtx=PATH",
        plugin_needs: Some("an NVIDIA RTX GPU (Ampere or newer) with its driver"),
    },
];

impl Provider {
    /// The provider `--ep NAME` names (case-insensitive; ONNX Runtime's own names are accepted too).
    pub fn find(name: &str) -> Option<&'static Provider> {
        let n = name.trim().to_ascii_lowercase();
        PROVIDERS
            .iter()
            .find(|p| p.cli == n || p.ort_name.to_ascii_lowercase() == n)
            .or_else(|| super::plugins::provider(name.trim()))
    }

    /// A provider known only through `--ep-library NAME=PATH`, NAME being ONNX Runtime's provider name.
    pub fn plugin(ort_name: &'static str) -> Provider {
        Provider {
            cli: ort_name,
            ort_name,
            build: None,
            install: "the plugin library given with --ep-library",
            plugin_needs: None,
        }
    }

    /// Whether the provider comes only as a plugin library (no registration compiled into ONNX Runtime).
    pub fn plugin_only(&self) -> bool {
        self.build.is_none() && self.cli != "cpu"
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
            None if self.plugin_only() => Err(format!(
                "{} comes only as a plugin library: {}",
                self.ort_name, self.install
            )),
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
