//! ONNX Runtime target through `ort` (load-dynamic). Every intermediate is exposed losslessly by appending an
//! encoded model that holds only their graph outputs to the original bytes (protobuf merges concatenated
//! messages); the unmodified model runs too, so the report can say whether exposing values moved the outputs.
//! [`run`] holds the runs (plain, every value, chosen values) and the session cache.

mod custom;
mod narrow;
pub mod placement;
mod run;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use half::{bf16, f16};
use ort::environment::Environment;
use ort::logging::LogLevel;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, TensorElementType, TensorRef};

use super::facts::{Instrumentation, OrtFacts, TargetFacts};
use super::ort_lib::Located;
use super::providers::Provider;
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::tensor::Tensor;

pub use crate::facts::OptLevel;
pub use run::note_moved;

static ENV: OnceLock<(Environment, Located, String)> = OnceLock::new();

/// Full version string (`1.31.1`) read from the library itself.
fn version_of(lib: &Path) -> Option<String> {
    // SAFETY: OrtGetApiBase is ONNX Runtime's documented C entry point; the library stays loaded by ort.
    unsafe {
        let l = libloading::Library::new(lib).ok()?;
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase> =
            l.get(b"OrtGetApiBase").ok()?;
        let base = get();
        if base.is_null() {
            return None;
        }
        let s = ((*base).GetVersionString)();
        Some(std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned())
    }
}

/// Loads ONNX Runtime once per process (ort allows one environment per process).
pub fn init(lib: &Located) -> Result<&'static (Environment, Located, String)> {
    if let Some(e) = ENV.get() {
        return Ok(e);
    }
    let version = version_of(&lib.path).unwrap_or_else(|| "unknown".into());
    let builder = ort::init_from(&lib.path).map_err(|e| Error::RuntimeMissing {
        reason: format!("{e}\n  hint: phantom needs ONNX Runtime >= 1.22; point ORT_DYLIB_PATH or --ort-lib at one"),
    })?;
    let env = builder
        .with_name("phantom")
        .with_telemetry(false)
        .build()
        .map_err(|e| Error::RuntimeMissing {
            reason: e.to_string(),
        })?;
    env.set_log_level(LogLevel::Fatal);
    Ok(ENV.get_or_init(|| (env, lib.clone(), version)))
}

/// Execution providers compiled into the loaded library.
pub fn available_providers() -> Vec<String> {
    let api = ort::api();
    let mut ptr: *mut *mut std::ffi::c_char = std::ptr::null_mut();
    let mut n: std::ffi::c_int = 0;
    // SAFETY: documented C API pair; the list is released right after copying.
    unsafe {
        if ort::Error::result_from_status((api.GetAvailableProviders)(&mut ptr, &mut n)).is_err() {
            return vec![];
        }
        let out = (0..n as usize)
            .map(|i| {
                std::ffi::CStr::from_ptr(*ptr.add(i))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let _ = ort::Error::result_from_status((api.ReleaseAvailableProviders)(ptr, n));
        out
    }
}

/// ONNX Runtime as a target.
pub struct OrtRunner {
    /// The execution provider and its `--ep-option` settings.
    pub provider: &'static Provider,
    pub options: Vec<(String, String)>,
    pub opt_level: OptLevel,
    /// The model the target runs when it is not the reference's (`--target-model`).
    pub target_model: Option<Graph>,
    env: &'static (Environment, Located, String),
    /// Filled by [`OrtRunner::run`].
    pub instrumentation: Option<Instrumentation>,
    /// Ask ORT for deterministic compute (`SetDeterministicCompute`).
    pub deterministic: bool,
    /// Keep sessions between runs (repeated runs in one session, `phantom determinism`).
    pub reuse: bool,
    /// Sessions built while set have ONNX Runtime's profiler on, writing to this path prefix.
    pub profiling: Option<std::path::PathBuf>,
    cache: HashMap<String, Session>,
    /// Where ORT placed the nodes, from the last session built with the placement log: in one line, and per
    /// provider.
    placed: String,
    placement: Vec<placement::Placed>,
}

impl OrtRunner {
    pub fn new(
        lib: &Located,
        provider: &'static Provider,
        options: Vec<(String, String)>,
        opt_level: OptLevel,
        target_model: Option<Graph>,
    ) -> Result<OrtRunner> {
        Ok(OrtRunner {
            provider,
            options,
            opt_level,
            target_model,
            env: init(lib)?,
            instrumentation: None,
            deterministic: false,
            reuse: false,
            profiling: None,
            cache: HashMap::new(),
            placed: String::new(),
            placement: Vec::new(),
        })
    }

    /// ONNX Runtime's CPU provider with default options (the wgpu target's host nodes).
    pub fn cpu(lib: &Located) -> Result<OrtRunner> {
        let cpu = Provider::find("cpu").expect("the CPU provider is in the table");
        OrtRunner::new(lib, cpu, vec![], OptLevel::All, None)
    }

    /// Where ONNX Runtime placed the nodes in the last session it logged that for (empty before any run).
    pub fn placed(&self) -> &str {
        &self.placed
    }

    fn ep_name(&self) -> &'static str {
        self.provider.ort_name
    }

    /// What may make the provider take nodes it left to the CPU provider.
    fn widen_hint(&self) -> String {
        let own = match self.provider.ort_name {
            "ggml" if !self.options.iter().any(|(k, _)| k == "partial") => {
                "onnxruntime-ggml takes a graph only whole unless `--ep-option partial=1`; "
            }
            _ => "",
        };
        format!(
            "{own}check the provider's options (`--ep-option KEY=VALUE`) and the model's ops against what it \
             supports, or compare with `--ep cpu`"
        )
    }

    fn session(
        &self,
        graph: &Graph,
        bytes: &[u8],
        placements: Arc<Mutex<placement::Log>>,
    ) -> Result<Session> {
        let fail = |e: ort::Error| Error::Ort {
            reason: format!("{}: {e}", graph.path.display()),
        };
        let ep_fail = |e: String| {
            Error::Ort {
            reason: format!(
                "the {} execution provider could not be registered: {e}\n  hint: install {}; `phantom runtimes` \
                 lists the providers the ONNX Runtime phantom found offers",
                self.ep_name(),
                self.provider.install
            ),
        }
        };
        let level = match self.opt_level {
            OptLevel::Disable => GraphOptimizationLevel::Disable,
            OptLevel::Basic => GraphOptimizationLevel::Level1,
            OptLevel::Extended => GraphOptimizationLevel::Level2,
            OptLevel::All => GraphOptimizationLevel::All,
        };
        let build = || -> std::result::Result<Session, Error> {
            crate::work::count(crate::work::Work::Session);
            let b = Session::builder(&self.env.0).map_err(fail)?;
            let b = b
                .with_optimization_level(level)
                .map_err(|e| fail(e.into()))?;
            let b = b
                .with_log_level(LogLevel::Verbose)
                .map_err(|e| fail(e.into()))?;
            // Without ONNX Runtime's CPU arena each buffer it frees goes back to the C heap: a run exposing every
            // value hands its outputs over one by one ([`run_session`]), and the arena would keep all of them as
            // free space beside their copies. Where each buffer comes from changes no value. A profiled session
            // keeps the arena: its timings and peak memory are those of ONNX Runtime as deployed.
            let mut b = b;
            if self.profiling.is_none() {
                let cpu = ort::ep::CPU::default().with_arena_allocator(false);
                ort::ep::ExecutionProvider::register(&cpu, &mut b).map_err(fail)?;
            }
            let b = match self.deterministic {
                true => b
                    .with_deterministic_compute(true)
                    .map_err(|e| fail(e.into()))?,
                false => b,
            };
            let b = match &self.profiling {
                Some(prefix) => b.with_profiling(prefix).map_err(|e| fail(e.into()))?,
                None => b,
            };
            let b = custom::register(b)?;
            let sink = placements.clone();
            let b = b
                .with_logger(Arc::new(move |_l, _c, _i, _loc, msg: &str| {
                    sink.lock().expect("placement log").capture(msg)
                }))
                .map_err(|e| fail(e.into()))?;
            let mut b = match graph.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(dir) => b
                    .with_config_entry(
                        "session.model_external_initializers_file_folder_path",
                        dir.to_string_lossy(),
                    )
                    .map_err(|e| fail(e.into()))?,
                None => b,
            };
            if let Some(devices) = self.plugin_devices()? {
                let prefix = self.provider.ort_name;
                let opts: Vec<(String, String)> = self
                    .options
                    .iter()
                    .map(|(k, v)| (format!("{prefix}.{k}"), v.clone()))
                    .collect();
                b = b
                    .with_devices(devices, Some(&opts))
                    .map_err(|e| ep_fail(e.to_string()))?;
                return b.commit_from_memory(bytes).map_err(fail);
            }
            if let Some(r) = super::cuda_libs::ensure(&self.env.1.path, self.provider.cli) {
                if let Some(m) = r.missing_message(self.provider.cli) {
                    return Err(ep_fail(m));
                }
            }
            if let Some(d) = self.provider.dispatch(&self.options).map_err(ep_fail)? {
                b = b
                    .with_execution_providers([d])
                    .map_err(|e| ep_fail(e.to_string()))?;
            }
            b.commit_from_memory(bytes).map_err(fail)
        };
        build()
    }
}

impl OrtRunner {
    /// The plugin devices to run on when the loaded ONNX Runtime has no built-in provider of this name and a
    /// plugin library brings it; `None` for built-in providers. A plugin-only provider with no plugin is an error.
    fn plugin_devices(&self) -> Result<Option<Vec<ort::device::Device<'static>>>> {
        let p = self.provider;
        if p.cli == "cpu" || available_providers().iter().any(|a| a == p.ort_name) {
            return Ok(None);
        }
        match super::plugins::for_provider(&self.env.0, p)? {
            Some((_, devices)) => Ok(Some(devices)),
            None if p.plugin_only() => Err(Error::Ort {
                reason: format!(
                    "{} is not compiled into the ONNX Runtime at {} and no plugin library brings it.\n  hint: {}",
                    p.ort_name,
                    self.env.1.path.display(),
                    p.install
                ),
            }),
            None => Ok(None),
        }
    }
}

/// The model bytes with every computed value that is not already a graph output appended as an output.
fn instrumented_bytes(graph: &Graph) -> Vec<u8> {
    let declared: std::collections::HashSet<&str> =
        graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let extra: Vec<&str> = graph
        .computed_values()
        .into_iter()
        .filter(|v| !declared.contains(v))
        .collect();
    crate::model::surgery::with_outputs(&graph.bytes, &extra)
}

fn input_value<'a>(t: &'a Tensor) -> ort::Result<SessionInputValue<'a>> {
    Ok(match t {
        Tensor::F64(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::F32(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::F16(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::Bf16(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::I64(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::I32(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::I16(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::I8(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::U64(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::U32(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::U16(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::U8(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::Bool(a) => TensorRef::from_array_view(a)?.into(),
        Tensor::Str(a) => ort::value::Tensor::from_string_array(a)?.into(),
    })
}

fn output_tensor(v: &DynValue) -> std::result::Result<Tensor, String> {
    let ty = v
        .dtype()
        .tensor_type()
        .ok_or_else(|| format!("non-tensor value ({})", v.dtype()))?;
    let e = |e: ort::Error| e.to_string();
    Ok(match ty {
        TensorElementType::Float64 => {
            Tensor::F64(v.try_extract_array::<f64>().map_err(e)?.to_owned())
        }
        TensorElementType::Float32 => {
            Tensor::F32(v.try_extract_array::<f32>().map_err(e)?.to_owned())
        }
        TensorElementType::Float16 => {
            Tensor::F16(v.try_extract_array::<f16>().map_err(e)?.to_owned())
        }
        TensorElementType::Bfloat16 => {
            Tensor::Bf16(v.try_extract_array::<bf16>().map_err(e)?.to_owned())
        }
        TensorElementType::Int64 => {
            Tensor::I64(v.try_extract_array::<i64>().map_err(e)?.to_owned())
        }
        TensorElementType::Int32 => {
            Tensor::I32(v.try_extract_array::<i32>().map_err(e)?.to_owned())
        }
        TensorElementType::Int16 => {
            Tensor::I16(v.try_extract_array::<i16>().map_err(e)?.to_owned())
        }
        TensorElementType::Int8 => Tensor::I8(v.try_extract_array::<i8>().map_err(e)?.to_owned()),
        TensorElementType::Uint64 => {
            Tensor::U64(v.try_extract_array::<u64>().map_err(e)?.to_owned())
        }
        TensorElementType::Uint32 => {
            Tensor::U32(v.try_extract_array::<u32>().map_err(e)?.to_owned())
        }
        TensorElementType::Uint16 => {
            Tensor::U16(v.try_extract_array::<u16>().map_err(e)?.to_owned())
        }
        TensorElementType::Uint8 => Tensor::U8(v.try_extract_array::<u8>().map_err(e)?.to_owned()),
        TensorElementType::Bool => {
            Tensor::Bool(v.try_extract_array::<bool>().map_err(e)?.to_owned())
        }
        TensorElementType::String => Tensor::Str(v.try_extract_string_array().map_err(e)?),
        other => return narrow::decoded(v, other),
    })
}

/// Runs `session` once on `inputs`; every output by name, converted to a host tensor or the reason it was not.
pub fn run_session(
    session: &mut Session,
    inputs: &Inputs,
    graph: &Graph,
) -> Result<Vec<(String, std::result::Result<Tensor, String>)>> {
    let names: Vec<String> = session
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    // ONNX Runtime reads row-major buffers: a transposed or sliced array (a host op's result on wgpu) is copied.
    let laid: Vec<std::borrow::Cow<'_, Tensor>> = inputs
        .tensors
        .iter()
        .map(|(_, t)| t.standard_layout())
        .collect();
    let mut feeds: Vec<(String, SessionInputValue<'_>)> = Vec::new();
    for n in &names {
        let t = inputs
            .tensors
            .iter()
            .position(|(k, _)| k == n)
            .map(|k| laid[k].as_ref())
            .ok_or_else(|| Error::Ort {
                reason: format!(
                    "{} expects input `{n}`, which the reference model does not have",
                    graph.path.display()
                ),
            })?;
        feeds.push((
            n.clone(),
            input_value(t).map_err(|e| Error::Ort {
                reason: e.to_string(),
            })?,
        ));
    }
    let outputs = session.run(feeds).map_err(|e| Error::Ort {
        reason: format!("{}: {e}", graph.path.display()),
    })?;
    // Owning iteration: each ORT buffer is freed right after its copy, so the peak is one tensor above the copies.
    Ok(outputs
        .into_iter()
        .map(|(name, v)| (name.to_string(), output_tensor(&v)))
        .collect())
}

impl OrtRunner {
    /// A session on the target model with every computed value exposed as an output.
    pub fn instrumented_session(&self, graph: &Graph) -> Result<Session> {
        let graph = self.target_model.as_ref().unwrap_or(graph);
        self.session(graph, &instrumented_bytes(graph), Arc::default())
    }

    /// A session on `graph` as it is, with this runner's EP and options.
    pub fn session_for(&self, graph: &Graph) -> Result<Session> {
        self.session(graph, &graph.bytes, Arc::default())
    }

    /// Whether ONNX Runtime accepts `graph` (creates a session and drops it).
    pub fn check_loads(&self, graph: &Graph) -> Result<()> {
        self.session(graph, &graph.bytes, Arc::default()).map(drop)
    }
}

impl OrtRunner {
    /// What ran: versions, library, provider requested and placement, opt level, model.
    pub fn facts(&self, graph: &Graph, placed: &str) -> TargetFacts {
        TargetFacts::Ort(OrtFacts {
            version: self.env.2.clone(),
            library: self.env.1.path.display().to_string(),
            library_source: self.env.1.source.clone(),
            build_info: ort::info().to_string(),
            ep_requested: self.ep_name().into(),
            ep_options: self.options.iter().cloned().collect(),
            ep_used: if placed.is_empty() {
                format!("{} (registered with error_on_failure)", self.ep_name())
            } else {
                placed.to_string()
            },
            placement: self.placement.clone(),
            opt_level: self.opt_level,
            deterministic: self.deterministic,
            model: graph.path.display().to_string(),
            custom_op_libraries: (crate::model::custom_ops::libraries().iter())
                .map(|l| format!("{} ({})", l.path.display(), l.source))
                .collect(),
        })
    }
}
