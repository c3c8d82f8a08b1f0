//! Plugin execution providers (`--ep-library`, `onnxruntime_ep_*` Python packages) and CUDA's libraries: what
//! cannot run is refused with exit 2 naming the plugin or library and what it needs, never a CPU fallback.

use std::path::{Path, PathBuf};

use crate::common::{ensure_runtime, model, phantom, phantom_env, root};

/// A file that is not a shared library, where a plugin library is expected.
fn fake_library(dir: &Path) -> PathBuf {
    let lib = dir.join("libonnxruntime_providers_fake.so");
    std::fs::write(&lib, b"not an ELF file").unwrap();
    lib
}

#[test]
fn an_ep_library_that_does_not_exist_or_cannot_load_is_refused_by_name() {
    ensure_runtime();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let (code, _, err) = phantom(&[
        "onnx",
        m,
        "--ep",
        "webgpu",
        "--ep-library",
        "webgpu=/nonexistent/libx.so",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/nonexistent/libx.so") && err.contains("no such file"),
        "{err}"
    );
    let (code, _, err) = phantom(&["onnx", m, "--ep", "webgpu", "--ep-library", "webgpu"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NAME=PATH"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let lib = fake_library(dir.path());
    let spec = format!("webgpu={}", lib.display());
    let (code, out, err) = phantom(&["onnx", m, "--ep", "webgpu", "--ep-library", &spec]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("plugin webgpu") && err.contains("could not be registered"),
        "{err}"
    );
    assert!(err.contains(lib.to_str().unwrap()), "{err}");
    // Listed by `phantom runtimes`, with why it did not load.
    let (code, out, err) = phantom(&["runtimes", "--ep-library", &spec]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("plugin    webgpu") && out.contains("not loaded"),
        "{out}"
    );
}

#[test]
fn a_provider_name_only_a_plugin_knows_becomes_an_ep() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_library(dir.path());
    let m = model("convnet.onnx");
    let spec = format!("AcmeExecutionProvider={}", lib.display());
    let (code, _, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--ep",
        "AcmeExecutionProvider",
        "--ep-library",
        &spec,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plugin AcmeExecutionProvider"), "{err}");
    // Without the library the name is not a target.
    let (code, _, err) = phantom(&["onnx", m.to_str().unwrap(), "--ep", "AcmeExecutionProvider"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a target phantom knows"), "{err}");
}

#[test]
fn installed_plugin_packages_are_found_through_python() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("onnxruntime_ep_fakegpu");
    std::fs::create_dir(&pkg).unwrap();
    let lib = fake_library(&pkg);
    std::fs::write(
        pkg.join("__init__.py"),
        format!(
            "def get_ep_name():\n    return 'WebGpuExecutionProvider'\n\ndef get_library_path():\n    return {:?}\n",
            lib.to_str().unwrap()
        ),
    )
    .unwrap();
    let env = [("PYTHONPATH", dir.path().to_str().unwrap())];
    let (code, out, err) = phantom_env(&["runtimes"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("plugin    onnxruntime_ep_fakegpu") && out.contains("python package"),
        "{out}"
    );
    let m = model("convnet.onnx");
    let (code, out, err) = phantom_env(&["onnx", m.to_str().unwrap(), "--ep", "webgpu"], &env);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("onnxruntime_ep_fakegpu") && err.contains("could not be registered"),
        "{err}"
    );
}

#[test]
fn a_plugin_only_provider_without_its_plugin_says_what_to_install() {
    ensure_runtime();
    let m = model("convnet.onnx");
    let empty = tempfile::tempdir().unwrap();
    let env = [("PYTHONPATH", empty.path().to_str().unwrap())];
    let (code, out, err) =
        phantom_env(&["onnx", m.to_str().unwrap(), "--ep", "tensorrt-rtx"], &env);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("NvTensorRTRTXExecutionProvider")
            && err.contains("onnxruntime-ep-nv-tensorrt-rtx"),
        "{err}"
    );
}

/// The real WebGPU plugin (`onnxruntime-ep-webgpu`, fetched once with pip): it registers; on a machine without a
/// GPU (lavapipe is not offered) `--ep webgpu` stops naming the plugin and what it needs, and with a device it runs
/// on the plugin and is compared like any target.
#[test]
fn the_webgpu_plugin_runs_or_names_what_it_needs() {
    ensure_runtime();
    let Some(lib) = webgpu_plugin() else {
        panic!("could not fetch onnxruntime-ep-webgpu with pip (PyPI is one of the registries phantom's CI reaches)")
    };
    let m = model("convnet.onnx");
    let spec = format!("webgpu={}", lib.display());
    let (code, out, err) = phantom(&["runtimes", "--ep-library", &spec]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("plugin    webgpu") && !out.contains("not loaded"),
        "{out}"
    );
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--ep",
        "webgpu",
        "--ep-library",
        &spec,
    ]);
    match code {
        0 => assert!(
            out.contains("WebGpuExecutionProvider") && out.contains("CLEAN"),
            "{out}"
        ),
        _ => {
            assert_eq!(code, 2, "{out}\n{err}");
            assert!(
                err.contains("reports no device") && err.contains("Vulkan"),
                "{err}"
            );
        }
    }
}

/// `target/test-plugins/onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so`, downloaded once.
fn webgpu_plugin() -> Option<PathBuf> {
    let dir = root().join("target/test-plugins");
    let _lock = crate::common::file_lock(&root().join("target/test-plugins.lock"));
    crate::locks::target("python3", &dir, "webgpu-plugin");
    let lib = dir.join("onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so");
    lib.is_file().then_some(lib)
}

/// Without the `nvidia-*` pip packages the CUDA provider's libraries are named one by one (on a machine with the
/// CUDA build of ONNX Runtime and no CUDA: checked through the ELF reader on the test binary here).
#[test]
fn cuda_libraries_are_read_from_the_provider_library() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_phantom"));
    let needed = phantom::runner::cuda_libs::needed(&exe).unwrap();
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "{needed:?}"
    );
}
