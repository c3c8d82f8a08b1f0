//! ONNX Runtime target through `ort` (load-dynamic). Every intermediate is exposed losslessly by appending an
//! encoded `ModelProto { graph { output: [...] } }` to the original bytes (protobuf merges concatenated
//! messages); the unmodified model runs too, so the report can say whether exposing values moved the outputs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use half::{bf16, f16};
use ort::environment::Environment;
use ort::ep::{self, ExecutionProvider as _};
use ort::logging::LogLevel;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, TensorElementType, TensorRef};
use prost::Message;
use tract_onnx::pb;

use super::ort_lib::Located;
use super::{RunOutput, Runner};
use crate::cli::args::{Ep, OptLevel};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::report::model::Instrumentation;
use crate::tensor::Tensor;

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
    pub ep: Ep,
    pub opt_level: OptLevel,
    /// The model the target runs when it is not the reference's (`--target-model`).
    pub target_model: Option<Graph>,
    env: &'static (Environment, Located, String),
    /// Filled by [`Runner::run`].
    pub instrumentation: Option<Instrumentation>,
    /// Ask ORT for deterministic compute (`SetDeterministicCompute`).
    pub deterministic: bool,
}

impl OrtRunner {
    pub fn new(
        lib: &Located,
        ep: Ep,
        opt_level: OptLevel,
        target_model: Option<Graph>,
    ) -> Result<OrtRunner> {
        Ok(OrtRunner {
            ep,
            opt_level,
            target_model,
            env: init(lib)?,
            instrumentation: None,
            deterministic: false,
        })
    }

    fn ep_name(&self) -> &'static str {
        match self.ep {
            Ep::Cpu | Ep::Wgpu => ep::CPU::NAME,
            Ep::Cuda => ep::CUDA::NAME,
            Ep::Rocm => ep::ROCm::NAME,
            Ep::Migraphx => ep::MIGraphX::NAME,
        }
    }

    fn session(
        &self,
        graph: &Graph,
        bytes: &[u8],
        placements: Arc<Mutex<Vec<String>>>,
    ) -> Result<Session> {
        let fail = |e: ort::Error| Error::Target {
            reason: format!("{}: {e}", graph.path.display()),
        };
        let ep_fail = |e: ort::Error| {
            Error::Target {
            reason: format!(
                "the {} execution provider could not be registered: {e}\n  hint: run `phantom runtimes` to see the \
                 providers this ONNX Runtime offers; the CUDA provider needs `pip install onnxruntime-gpu` and its CUDA libraries",
                self.ep_name()
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
            let b = Session::builder(&self.env.0).map_err(fail)?;
            let b = b
                .with_optimization_level(level)
                .map_err(|e| fail(e.into()))?;
            let b = b
                .with_log_level(LogLevel::Verbose)
                .map_err(|e| fail(e.into()))?;
            let b = match self.deterministic {
                true => b
                    .with_deterministic_compute(true)
                    .map_err(|e| fail(e.into()))?,
                false => b,
            };
            let sink = placements.clone();
            let b = b
                .with_logger(Arc::new(move |_l, _c, _i, _loc, msg: &str| {
                    if msg.contains("placed on [") {
                        sink.lock()
                            .expect("placement log")
                            .push(msg.trim().to_string());
                    }
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
            b = match self.ep {
                Ep::Cpu | Ep::Wgpu => b,
                Ep::Cuda => b
                    .with_execution_providers([ep::CUDA::default().build().error_on_failure()])
                    .map_err(|e| ep_fail(e.into()))?,
                Ep::Rocm => b
                    .with_execution_providers([ep::ROCm::default().build().error_on_failure()])
                    .map_err(|e| ep_fail(e.into()))?,
                Ep::Migraphx => b
                    .with_execution_providers([ep::MIGraphX::default().build().error_on_failure()])
                    .map_err(|e| ep_fail(e.into()))?,
            };
            b.commit_from_memory(bytes).map_err(fail)
        };
        build()
    }
}

/// Original model bytes plus an appended message that adds `names` as graph outputs (name only, no type).
pub fn with_extra_outputs(bytes: &[u8], names: &[&str]) -> Vec<u8> {
    let extra = pb::ModelProto {
        graph: Some(pb::GraphProto {
            output: names
                .iter()
                .map(|n| pb::ValueInfoProto {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut out = bytes.to_vec();
    out.extend_from_slice(&extra.encode_to_vec());
    out
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
    with_extra_outputs(&graph.bytes, &extra)
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
        other => return Err(format!("element type {other} is not compared")),
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
    let mut feeds: Vec<(String, SessionInputValue<'_>)> = Vec::new();
    for n in &names {
        let t = inputs
            .tensors
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, t)| t)
            .ok_or_else(|| Error::Target {
                reason: format!(
                    "{} expects input `{n}`, which the reference model does not have",
                    graph.path.display()
                ),
            })?;
        feeds.push((
            n.clone(),
            input_value(t).map_err(|e| Error::Target {
                reason: e.to_string(),
            })?,
        ));
    }
    let outputs = session.run(feeds).map_err(|e| Error::Target {
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
        self.session(
            graph,
            &instrumented_bytes(graph),
            Arc::new(Mutex::new(Vec::new())),
        )
    }

    /// A session on `graph` as it is, with this runner's EP and options.
    pub fn session_for(&self, graph: &Graph) -> Result<Session> {
        self.session(graph, &graph.bytes, Arc::new(Mutex::new(Vec::new())))
    }

    /// Whether ONNX Runtime accepts `graph` (creates a session and drops it).
    pub fn check_loads(&self, graph: &Graph) -> Result<()> {
        self.session(graph, &graph.bytes, Arc::new(Mutex::new(Vec::new())))
            .map(drop)
    }

    /// Runs the unmodified model once and returns its declared outputs only.
    pub fn run_plain(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let graph = self.target_model.clone().unwrap_or_else(|| graph.clone());
        let mut session = self.session(&graph, &graph.bytes, Arc::new(Mutex::new(Vec::new())))?;
        let mut out = RunOutput::default();
        for (name, v) in run_session(&mut session, inputs, &graph)? {
            match v {
                Ok(t) => {
                    out.values.insert(name, t);
                }
                Err(why) => {
                    out.missing.insert(name, why);
                }
            }
        }
        Ok(out)
    }
}

impl Runner for OrtRunner {
    fn name(&self) -> String {
        "onnxruntime".into()
    }

    fn version(&self) -> String {
        self.env.2.clone()
    }

    fn run(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let graph = self.target_model.clone().unwrap_or_else(|| graph.clone());
        let placements = Arc::new(Mutex::new(Vec::new()));
        let mut plain = self.session(&graph, &graph.bytes, placements.clone())?;
        let plain_out = run_session(&mut plain, inputs, &graph)?;
        drop(plain);
        let mut inst = self.session(
            &graph,
            &instrumented_bytes(&graph),
            Arc::new(Mutex::new(Vec::new())),
        )?;
        let inst_out = run_session(&mut inst, inputs, &graph)?;
        drop(inst);

        let mut out = RunOutput::default();
        let mut moved = false;
        let mut max_change = 0.0f64;
        for (name, v) in inst_out {
            match v {
                Ok(t) => {
                    out.values.insert(name, t);
                }
                Err(why) => {
                    out.missing.insert(name, why);
                }
            }
        }
        for (name, v) in plain_out {
            if let Ok(t) = v {
                if let Some(i) = out.values.get(&name) {
                    if i != &t {
                        moved = true;
                        if i.shape() == t.shape() {
                            let (a, b) = (i.to_f64_array(), t.to_f64_array());
                            max_change = a
                                .iter()
                                .zip(b.iter())
                                .map(|(x, y)| (x - y).abs())
                                .fold(max_change, f64::max);
                        } else {
                            max_change = f64::INFINITY;
                        }
                    }
                }
                out.values.insert(name, t);
            }
        }
        self.instrumentation = Some(Instrumentation {
            outputs_moved: moved,
            max_abs_change: max_change,
            outputs_from_plain_run: true,
        });
        let placed = placements.lock().expect("placement log").join("; ");
        out.details = self.details(&graph, &placed);
        Ok(out)
    }
}

impl OrtRunner {
    /// Facts for the report: versions, library, EP requested and used, opt level, model.
    pub fn details(&self, graph: &Graph, placed: &str) -> BTreeMap<String, String> {
        let placed = placed.to_string();
        let mut d = BTreeMap::new();
        d.insert("version".into(), self.env.2.clone());
        d.insert("library".into(), self.env.1.path.display().to_string());
        d.insert("library_source".into(), self.env.1.source.clone());
        d.insert("build_info".into(), ort::info().to_string());
        d.insert("ep_requested".into(), self.ep_name().into());
        d.insert(
            "ep_used".into(),
            if placed.is_empty() {
                format!("{} (registered with error_on_failure)", self.ep_name())
            } else {
                placed
            },
        );
        d.insert(
            "opt_level".into(),
            format!("{:?}", self.opt_level).to_lowercase(),
        );
        d.insert("model".into(), graph.path.display().to_string());
        d
    }
}
