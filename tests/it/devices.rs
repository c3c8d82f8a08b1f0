//! `phantom devices`: wgpu adapters. CI installs lavapipe (`mesa-vulkan-drivers`), so under `CI=true` at least one
//! adapter must be listed; elsewhere a machine without a Vulkan/Metal/DX12 driver lists none.

use crate::common::phantom;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

#[test]
fn devices_lists_adapters_with_f16_support_and_limits() {
    let (code, out, err) = phantom(&["devices", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = list.as_array().unwrap();
    if list.is_empty() {
        assert!(
            !ci(),
            "CI=true but no wgpu adapter: .ci/run installs mesa-vulkan-drivers (lavapipe)"
        );
        let (code, out, _) = phantom(&["devices"]);
        assert_eq!(code, 0);
        assert!(out.contains("no wgpu adapter found"), "{out}");
        return;
    }
    for a in list {
        assert!(!a["name"].as_str().unwrap().is_empty(), "{a}");
        assert!(a["shader_f16"].is_boolean());
        assert!(
            a["max_storage_buffer_binding_size"].as_u64().unwrap() >= 1 << 20,
            "{a}"
        );
        assert!(a["max_compute_invocations_per_workgroup"].as_u64().unwrap() >= 64);
    }
    // Filtering by a name that exists keeps it; one that matches nothing is a clear error, not a panic.
    let first = list[0]["name"].as_str().unwrap();
    let word = first.split_whitespace().next().unwrap();
    let (code, out, err) = phantom(&["devices", "--adapter", word]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(word), "{out}");
    let (code, out, _) = phantom(&["devices"]);
    assert_eq!(code, 0);
    assert!(out.contains("SHADER_F16") && out.contains(first), "{out}");
}

#[test]
fn an_adapter_name_matching_nothing_is_an_error() {
    let (code, _, err) = phantom(&["devices", "--adapter", "no-such-gpu-xyz"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--adapter no-such-gpu-xyz"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
