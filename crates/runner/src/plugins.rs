//! ONNX Runtime plugin execution providers: libraries registered at run time (`onnxruntime-ep-webgpu`, NVIDIA's
//! TensorRT RTX plugin, the OpenVINO plugin) instead of compiled into `libonnxruntime`.
//!
//! Where they come from: `--ep-library NAME=PATH` (NAME is an `--ep` name or an ONNX Runtime provider name), then
//! the `onnxruntime_ep_*` Python packages python3 can import (their `get_library_path()`), then any other package
//! holding a library named for ONNX Runtime that exports the plugin entry point `CreateEpFactories`, whatever the
//! package's name (`onnxruntime_ggml`'s `lib/libonnxruntime_ggml.so` is `--ep ggml`: the package name without
//! `onnxruntime_`). A plugin is registered
//! with the environment the first time a session asks for its provider and the loaded library has no built-in one;
//! the session then runs on the devices the plugin reports. A plugin with no device is an error naming it and what
//! it needs, never a fallback.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use super::providers::Provider;
use crate::error::{Error, Result};

/// One plugin library.
#[derive(Clone, Debug, PartialEq)]
pub struct Plugin {
    /// The name it is registered under: `--ep-library`'s NAME, or the Python package's name.
    pub name: String,
    /// ONNX Runtime's names of the providers it brings, when known before loading it.
    pub eps: Vec<String>,
    pub path: PathBuf,
    /// `--ep-library`, or `python package onnxruntime_ep_webgpu`.
    pub source: String,
}

/// A device a plugin offers, as `phantom runtimes` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginDevice {
    pub ep: String,
    pub vendor: String,
    pub kind: String,
    pub id: u32,
}

static REQUESTED: Mutex<Vec<Plugin>> = Mutex::new(Vec::new());
static DISCOVERED: OnceLock<Vec<Plugin>> = OnceLock::new();
static REGISTERED: Mutex<Vec<(PathBuf, std::result::Result<(), String>)>> = Mutex::new(Vec::new());

static DYNAMIC: Mutex<Vec<&'static Provider>> = Mutex::new(Vec::new());

/// The provider `--ep NAME` names when only `--ep-library NAME=PATH` knows it (NAME is ONNX Runtime's name for it).
pub fn provider(name: &str) -> Option<&'static Provider> {
    let requested = REQUESTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let plugin = (requested.iter().chain(discovered()))
        .find(|p| p.name == name && (p.eps.is_empty() || p.eps.iter().any(|e| e == name)))?;
    let mut dynamic = DYNAMIC.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = dynamic.iter().find(|p| p.ort_name == plugin.name) {
        return Some(p);
    }
    let ort_name: &'static str = Box::leak(plugin.name.clone().into_boxed_str());
    let p: &'static Provider = Box::leak(Box::new(Provider::plugin(ort_name)));
    dynamic.push(p);
    Some(p)
}

/// Takes `--ep-library NAME=PATH` flags (checked: the file must exist).
pub fn request(specs: &[String]) -> Result<()> {
    let mut req = REQUESTED.lock().unwrap_or_else(|e| e.into_inner());
    for spec in specs {
        let (name, path) = spec.split_once('=').ok_or_else(|| {
            Error::Usage(format!(
                "--ep-library {spec}: expected NAME=PATH, e.g. --ep-library webgpu=/path/libonnxruntime_providers_webgpu.so"
            ))
        })?;
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(Error::Usage(format!(
                "--ep-library {name}={}: no such file (the plugin's shared library: a Python package's \
                 get_library_path() says where it is)",
                path.display()
            )));
        }
        // ONNX Runtime resolves a relative path against its own folder, not the working directory.
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let eps = super::providers::PROVIDERS
            .iter()
            .find(|p| p.cli == name || p.ort_name == name)
            .map(|p| vec![p.ort_name.to_string()])
            .unwrap_or_else(|| vec![name.to_string()]);
        let plugin = Plugin {
            name: name.to_string(),
            eps,
            path,
            source: "--ep-library".into(),
        };
        if !req.contains(&plugin) {
            req.push(plugin);
        }
    }
    Ok(())
}

const PY_DISCOVER: &str = "import importlib, mmap, os, pkgutil
def exports_entry_point(path):
    try:
        with open(path, 'rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b'CreateEpFactories\\0') >= 0
    except Exception:
        return False
for m in pkgutil.iter_modules():
    if m.name.startswith('onnxruntime_ep_'):
        try:
            mod = importlib.import_module(m.name)
            eps = mod.get_ep_names() if hasattr(mod, 'get_ep_names') else [mod.get_ep_name()]
            print(m.name + '\\t' + ','.join(eps) + '\\t' + mod.get_library_path())
        except Exception as e:
            pass
        continue
    if not m.ispkg or m.name == 'onnxruntime' or not hasattr(m.module_finder, 'path'):
        continue
    root = os.path.join(m.module_finder.path, m.name)
    for d, dirs, files in os.walk(root):
        if d[len(root):].count(os.sep) >= 2:
            dirs[:] = []
        for f in files:
            if 'onnxruntime' in f and f.endswith(('.so', '.dylib', '.dll')) and exports_entry_point(os.path.join(d, f)):
                name = m.name.replace('onnxruntime_', '', 1).replace('ep_', '', 1) or m.name
                print(name + '\\t\\t' + os.path.join(d, f) + '\\t' + m.name)
";

/// The `onnxruntime_ep_*` Python packages python3 can import (asked once per process).
fn discovered() -> &'static [Plugin] {
    DISCOVERED.get_or_init(|| {
        let Ok(out) = Command::new("python3").args(["-c", PY_DISCOVER]).output() else {
            return vec![];
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                let (name, eps, path) = (f.next()?, f.next()?, f.next()?);
                let source = match f.next() {
                    Some(package) => format!("python package {package}, by its entry point"),
                    None => format!("python package {name}"),
                };
                Some(Plugin {
                    name: name.to_string(),
                    eps: eps
                        .split(',')
                        .filter(|e| !e.is_empty())
                        .map(String::from)
                        .collect(),
                    path: PathBuf::from(path),
                    source,
                })
            })
            .filter(|p| p.path.is_file())
            .collect()
    })
}

/// Every plugin phantom knows of: `--ep-library` first, then the Python packages.
pub fn all() -> Vec<Plugin> {
    let mut out = REQUESTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    out.extend(discovered().iter().cloned());
    out
}

/// Registers a plugin with the environment once per process; the answer is remembered.
pub fn register(env: &Environment, plugin: &Plugin) -> std::result::Result<(), String> {
    let mut done = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = done.iter().find(|(p, _)| p == &plugin.path) {
        return r.clone();
    }
    let r = env
        .register_ep_library(&plugin.name, &plugin.path)
        .map_err(|e| {
            format!(
                "plugin {} ({}) could not be registered: {e}",
                plugin.name,
                plugin.path.display()
            )
        });
    done.push((plugin.path.clone(), r.clone()));
    r
}

/// The devices the environment offers for provider `ep` (ONNX Runtime's name).
pub fn devices_of<'e>(env: &'e Environment, ep: &str) -> Vec<ort::device::Device<'e>> {
    env.devices()
        .filter(|d| d.ep().is_ok_and(|n| n == ep))
        .collect()
}

/// What a device is, for listings.
pub fn describe(d: &ort::device::Device<'_>) -> PluginDevice {
    let hw = d.hardware_device();
    PluginDevice {
        ep: d.ep().unwrap_or("?").to_string(),
        vendor: hw.vendor().unwrap_or("?").to_string(),
        kind: format!("{:?}", hw.ty()),
        id: hw.id(),
    }
}

/// The plugin that brings provider `p`, registered, with at least one device. `Ok(None)` when no plugin phantom
/// knows of brings it; an error when one does but cannot load or reports no device.
pub fn for_provider<'e>(
    env: &'e Environment,
    p: &Provider,
) -> Result<Option<(Plugin, Vec<ort::device::Device<'e>>)>> {
    let candidates: Vec<Plugin> = all()
        .into_iter()
        .filter(|pl| pl.eps.iter().any(|e| e == p.ort_name) || pl.name == p.cli)
        .collect();
    let mut failures: Vec<String> = Vec::new();
    for pl in candidates {
        match register(env, &pl) {
            Err(e) => failures.push(e),
            Ok(()) => {
                let devices = devices_of(env, p.ort_name);
                if !devices.is_empty() {
                    return Ok(Some((pl, devices)));
                }
                failures.push(format!(
                    "plugin {} ({}, from {}) loaded but reports no device for {}: it needs {}",
                    pl.name,
                    pl.path.display(),
                    pl.source,
                    p.ort_name,
                    p.plugin_needs.unwrap_or("a device it supports")
                ));
            }
        }
    }
    match failures.is_empty() {
        true => Ok(None),
        false => Err(Error::Ort {
            reason: failures.join("\n"),
        }),
    }
}

/// Devices of every plugin for `phantom runtimes`: per plugin, its devices or why it cannot load.
pub fn listing(env: &Environment) -> Vec<(Plugin, std::result::Result<Vec<PluginDevice>, String>)> {
    let before: HashMap<String, usize> = env.devices().fold(HashMap::new(), |mut m, d| {
        *m.entry(d.ep().unwrap_or("?").to_string()).or_default() += 1;
        m
    });
    all()
        .into_iter()
        .map(|pl| {
            let r = register(env, &pl).map(|()| {
                env.devices()
                    .filter(|d| {
                        let ep = d.ep().unwrap_or("?");
                        pl.eps.iter().any(|e| e == ep) || !before.contains_key(ep)
                    })
                    .map(|d| describe(&d))
                    .collect()
            });
            (pl, r)
        })
        .collect()
}
