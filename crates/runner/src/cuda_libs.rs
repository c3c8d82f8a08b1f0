//! CUDA's libraries for ONNX Runtime's CUDA and TensorRT providers, found where pip puts them.
//!
//! `onnxruntime-gpu` does not ship CUDA: its provider library needs `libcublas.so.13`, `libcudart.so.13`, cuDNN…
//! from the `nvidia-*` pip packages (`site-packages/nvidia/cu13/lib`, `nvidia/cudnn/lib`), which the system loader
//! does not search. ONNX Runtime's Python package preloads them (`onnxruntime.preload_dlls`); phantom does the same
//! before it registers the provider: it reads the provider library's own `DT_NEEDED` list (so the CUDA major version
//! is the one the library was built for), finds each CUDA library in the pip packages of every `python3` path,
//! `CUDA_PATH`/`CUDA_HOME` or the system loader's own search, and loads it globally. What cannot be found is an
//! error naming each library and where phantom looked.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// How each CUDA library the provider needs was resolved.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The provider library read (`libonnxruntime_providers_cuda.so`).
    pub provider_lib: PathBuf,
    /// Loaded from a pip package or CUDA_PATH: soname and file.
    pub loaded: Vec<(String, PathBuf)>,
    /// Left to the system loader, which finds them itself.
    pub system: Vec<String>,
    /// Found nowhere.
    pub missing: Vec<String>,
    /// Libraries the provider opens only when a model needs them (cuDNN for convolutions), not found.
    pub optional_missing: Vec<String>,
    /// The folders searched, for the error.
    pub searched: Vec<PathBuf>,
}

impl Resolved {
    /// One line per library, for `phantom runtimes`.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .loaded
            .iter()
            .map(|(n, p)| format!("{n} ← {}", p.display()))
            .collect();
        out.extend(self.system.iter().map(|n| format!("{n} ← system loader")));
        out.extend(self.missing.iter().map(|n| format!("{n} MISSING")));
        out.extend(
            self.optional_missing
                .iter()
                .map(|n| format!("{n} not found (opened when a model needs it)")),
        );
        out
    }

    /// The error a provider registration reports when libraries are missing.
    pub fn missing_message(&self, provider: &str) -> Option<String> {
        if self.missing.is_empty() {
            return None;
        }
        let searched: Vec<String> = self
            .searched
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let driver = self.missing.iter().any(|m| m.starts_with("libcuda.so"));
        Some(format!(
            "{} needs {} that phantom could not find (searched the nvidia-* pip packages of python3's paths, \
             CUDA_PATH/CUDA_HOME and the system loader: {}).\n  hint: {}",
            Path::new(&self.provider_lib)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| provider.to_string()),
            self.missing.join(", "),
            if searched.is_empty() { "no pip folders found".into() } else { searched.join(", ") },
            if driver {
                "libcuda.so.1 is the NVIDIA driver's: this machine has no NVIDIA GPU driver".to_string()
            } else {
                "`pip install \"onnxruntime-gpu[cuda,cudnn]\"` in the python3 phantom sees, or add the folders \
                 holding them to LD_LIBRARY_PATH"
                    .to_string()
            }
        ))
    }
}

/// The file names (`DT_NEEDED`) an ELF64 little-endian shared library links against.
pub fn needed(lib: &Path) -> Result<Vec<String>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    let mut head = [0u8; 64];
    f.read_exact(&mut head)
        .map_err(|e| format!("{}: {e}", lib.display()))?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Err(format!(
            "{} is not a 64-bit little-endian ELF file",
            lib.display()
        ));
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(&head, 32), u16_at(&head, 54), u16_at(&head, 56));
    if phentsize < 56 || phnum > 4096 {
        return Err(format!(
            "{}: unexpected program header table",
            lib.display()
        ));
    }
    let mut ph = vec![0u8; (phentsize * phnum) as usize];
    f.seek(SeekFrom::Start(phoff))
        .and_then(|_| f.read_exact(&mut ph))
        .map_err(|e| format!("{}: {e}", lib.display()))?;
    // (type, file offset, virtual address, file size) of each segment.
    let segs: Vec<(u32, u64, u64, u64)> = (0..phnum as usize)
        .map(|i| {
            let b = &ph[i * phentsize as usize..];
            let t = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
            (t, u64_at(b, 8), u64_at(b, 16), u64_at(b, 32))
        })
        .collect();
    let (_, dyn_off, _, dyn_size) = *segs
        .iter()
        .find(|s| s.0 == 2)
        .ok_or_else(|| format!("{} has no dynamic section", lib.display()))?;
    let mut dynamic = vec![0u8; dyn_size.min(1 << 20) as usize];
    f.seek(SeekFrom::Start(dyn_off))
        .and_then(|_| f.read_exact(&mut dynamic))
        .map_err(|e| format!("{}: {e}", lib.display()))?;
    let entries: Vec<(u64, u64)> = dynamic
        .chunks_exact(16)
        .map(|e| (u64_at(e, 0), u64_at(e, 8)))
        .take_while(|e| e.0 != 0)
        .collect();
    let strtab = entries.iter().find(|e| e.0 == 5).map(|e| e.1);
    let strsz = entries.iter().find(|e| e.0 == 10).map(|e| e.1);
    let (Some(strtab), Some(strsz)) = (strtab, strsz) else {
        return Err(format!("{} has no dynamic string table", lib.display()));
    };
    // DT_STRTAB is a virtual address: map it through the loadable segment that holds it.
    let off = segs
        .iter()
        .find(|s| s.0 == 1 && strtab >= s.2 && strtab < s.2 + s.3)
        .map(|s| strtab - s.2 + s.1)
        .ok_or_else(|| format!("{}: string table outside every segment", lib.display()))?;
    let mut strs = vec![0u8; strsz.min(16 << 20) as usize];
    f.seek(SeekFrom::Start(off))
        .and_then(|_| f.read_exact(&mut strs))
        .map_err(|e| format!("{}: {e}", lib.display()))?;
    Ok(entries
        .iter()
        .filter(|e| e.0 == 1 && (e.1 as usize) < strs.len())
        .map(|e| {
            let s = &strs[e.1 as usize..];
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        })
        .collect())
}

/// The libraries ONNX Runtime's CUDA provider opens by name at run time, as `onnxruntime.preload_dlls` lists them
/// for the CUDA major version the provider links (`libcudart.so.N`): cuDNN 9, cuFFT, NVRTC.
fn loaded_at_run_time(needed: &[String]) -> Vec<String> {
    let Some(major) = needed
        .iter()
        .find_map(|n| n.strip_prefix("libcudart.so."))
        .and_then(|v| v.parse::<u32>().ok())
    else {
        return vec![];
    };
    let cufft = major.saturating_sub(1);
    [
        "libcudnn.so.9".to_string(),
        format!("libcufft.so.{cufft}"),
        format!("libnvrtc.so.{major}"),
    ]
    .into_iter()
    .filter(|n| !needed.contains(n))
    .collect()
}

/// Whether a needed library is CUDA's (or cuDNN's, TensorRT's), not the C runtime's or ONNX Runtime's own.
fn is_cuda(soname: &str) -> bool {
    [
        "libcu",
        "libnvrtc",
        "libnvinfer",
        "libnvonnxparser",
        "libnvJitLink",
    ]
    .iter()
    .any(|p| soname.starts_with(p))
}

const PY_PATHS: &str = "import sys\nfor p in sys.path: print(p)";

/// Folders that may hold CUDA's libraries: `site-packages/nvidia/*/lib` of python3's paths and of the site-packages
/// holding ONNX Runtime, then `CUDA_PATH`/`CUDA_HOME`.
fn search_dirs(ort_lib: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    // …/site-packages/onnxruntime/capi/libonnxruntime.so → …/site-packages
    if let Some(sp) = ort_lib.ancestors().nth(3) {
        roots.push(sp.to_path_buf());
    }
    if let Ok(out) = Command::new("python3").args(["-c", PY_PATHS]).output() {
        roots.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(PathBuf::from),
        );
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for root in roots {
        let Ok(pkgs) = std::fs::read_dir(root.join("nvidia")) else {
            continue;
        };
        let mut found: Vec<PathBuf> = pkgs
            .filter_map(|e| e.ok().map(|e| e.path().join("lib")))
            .filter(|p| p.is_dir())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            dirs.push(PathBuf::from(v).join("lib64"));
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.canonicalize().unwrap_or_else(|_| d.clone())));
    dirs
}

/// Loads a library with its symbols global, so the provider's `DT_NEEDED` resolves to it; kept loaded for good.
pub(crate) fn load_global(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading a CUDA library runs its initialisers, as ONNX Runtime's own preload does.
    let lib =
        unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
    std::mem::forget(lib);
    Ok(())
}

/// Whether the system loader finds a library by its soname alone.
fn system_has(soname: &str) -> bool {
    load_global(Path::new(soname)).is_ok()
}

/// Resolves and loads the CUDA libraries `provider_file` (beside `ort_lib`) needs. `None` when the provider
/// library is not there (the loaded ONNX Runtime has no such provider; ONNX Runtime says so itself).
pub fn resolve(ort_lib: &Path, provider_file: &str) -> Option<Resolved> {
    let provider_lib = ort_lib.parent()?.join(provider_file);
    let wanted: Vec<String> = needed(&provider_lib)
        .ok()?
        .into_iter()
        .filter(|n| is_cuda(n))
        .collect();
    let optional = loaded_at_run_time(&wanted);
    let searched = search_dirs(ort_lib);
    let mut r = Resolved {
        provider_lib,
        searched: searched.clone(),
        ..Default::default()
    };
    // Dependencies first (cublasLt before cublas): retry until no library loads any more.
    let mut pending: Vec<(String, PathBuf)> = Vec::new();
    for name in wanted {
        match searched.iter().map(|d| d.join(&name)).find(|p| p.exists()) {
            Some(p) => pending.push((name, p)),
            None if system_has(&name) => r.system.push(name),
            None => r.missing.push(name),
        }
    }
    // Libraries the provider opens itself when it needs them (cuDNN, cuFFT, NVRTC): loaded when found.
    for name in optional {
        if let Some(p) = searched.iter().map(|d| d.join(&name)).find(|p| p.exists()) {
            pending.push((name, p));
        } else if !system_has(&name) {
            r.optional_missing.push(name);
        }
    }
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|(n, p)| match load_global(p) {
            Ok(()) => {
                r.loaded.push((n.clone(), p.clone()));
                false
            }
            Err(_) => true,
        });
        if pending.len() == before {
            r.missing.extend(
                pending
                    .iter()
                    .map(|(n, p)| format!("{n} (at {}, fails to load)", p.display())),
            );
            break;
        }
    }
    Some(r)
}

/// The provider library file an execution provider's CUDA needs come from.
pub fn provider_file(cli: &str) -> Option<&'static str> {
    match cli {
        "cuda" => Some("libonnxruntime_providers_cuda.so"),
        "tensorrt" => Some("libonnxruntime_providers_tensorrt.so"),
        _ => None,
    }
}

type Cache = std::sync::Mutex<std::collections::HashMap<&'static str, Option<&'static Resolved>>>;
static RESOLVED: OnceLock<Cache> = OnceLock::new();

/// Resolves once per provider and process (loading is global); later sessions reuse the answer.
pub fn ensure(ort_lib: &Path, cli: &str) -> Option<&'static Resolved> {
    let file = provider_file(cli)?;
    let cache = RESOLVED.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    *cache
        .entry(file)
        .or_insert_with(|| resolve(ort_lib, file).map(|r| &*Box::leak(Box::new(r))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_needed_libraries_of_an_elf_file() {
        // The test binary itself links the C library.
        let exe = std::env::current_exe().unwrap();
        let n = needed(&exe).unwrap();
        assert!(n.iter().any(|l| l.starts_with("libc.so")), "{n:?}");
        assert!(needed(Path::new("Cargo.toml")).is_err());
    }

    #[test]
    fn only_cuda_libraries_are_preloaded() {
        assert!(
            is_cuda("libcublasLt.so.13") && is_cuda("libcudnn.so.9") && is_cuda("libnvrtc.so.13")
        );
        assert!(!is_cuda("libc.so.6") && !is_cuda("libonnxruntime_providers_shared.so"));
    }

    #[test]
    fn a_missing_library_is_named_with_the_folders_searched() {
        let r = Resolved {
            provider_lib: PathBuf::from("/x/libonnxruntime_providers_cuda.so"),
            missing: vec!["libcublas.so.13".into()],
            searched: vec![PathBuf::from("/sp/nvidia/cu13/lib")],
            ..Default::default()
        };
        let m = r.missing_message("cuda").unwrap();
        assert!(
            m.contains("libcublas.so.13") && m.contains("/sp/nvidia/cu13/lib"),
            "{m}"
        );
        assert!(m.contains("onnxruntime-gpu[cuda,cudnn]"), "{m}");
    }
}
