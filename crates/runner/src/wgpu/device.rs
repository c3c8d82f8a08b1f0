//! wgpu adapters: listing them for `phantom devices` and picking one by name. Only the Vulkan, Metal and DX12
//! backends are compiled in; Mesa's lavapipe (Debian's `mesa-vulkan-drivers`) gives a software Vulkan adapter on
//! machines without a GPU. wgpu panics when `WGPU_ADAPTER_NAME` matches nothing, so phantom filters the list itself.

use serde::Serialize;

use crate::error::{Error, Result};

/// What `phantom devices` shows about one adapter.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    /// discrete, integrated, virtual, cpu or other.
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub vendor: u32,
    pub device: u32,
    /// Native f16 arithmetic in shaders (`enable f16;`); without it phantom emulates f16 by rounding.
    pub shader_f16: bool,
    /// Every optional feature the adapter offers, by wgpu's name.
    pub features: Vec<String>,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_size: [u32; 3],
    pub max_compute_workgroups_per_dimension: u32,
}

pub fn summarize(a: &::wgpu::Adapter) -> AdapterSummary {
    let info = a.get_info();
    let features = a.features();
    let limits = a.limits();
    AdapterSummary {
        name: info.name,
        backend: info.backend.to_string(),
        device_type: match info.device_type {
            ::wgpu::DeviceType::DiscreteGpu => "discrete",
            ::wgpu::DeviceType::IntegratedGpu => "integrated",
            ::wgpu::DeviceType::VirtualGpu => "virtual",
            ::wgpu::DeviceType::Cpu => "cpu",
            ::wgpu::DeviceType::Other => "other",
        }
        .into(),
        driver: info.driver,
        driver_info: info.driver_info,
        vendor: info.vendor,
        device: info.device,
        shader_f16: features.contains(::wgpu::Features::SHADER_F16),
        features: features.iter_names().map(|(n, _)| n.to_string()).collect(),
        max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
        max_buffer_size: limits.max_buffer_size,
        max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
        max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        max_compute_workgroup_size: [
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_size_y,
            limits.max_compute_workgroup_size_z,
        ],
        max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
    }
}

/// Mesa complains on stderr when `XDG_RUNTIME_DIR` is unset (headless machines, CI); give it a private one.
fn quiet_mesa() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_some() {
        return;
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
    let dir = std::env::temp_dir().join(format!("phantom-xdg-{user}"));
    if std::fs::create_dir_all(&dir).is_ok() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        std::env::set_var("XDG_RUNTIME_DIR", &dir);
    }
}

fn instance() -> ::wgpu::Instance {
    quiet_mesa();
    ::wgpu::Instance::new(::wgpu::InstanceDescriptor {
        backends: ::wgpu::Backends::VULKAN | ::wgpu::Backends::METAL | ::wgpu::Backends::DX12,
        ..::wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// Every adapter wgpu finds (none when no Vulkan/Metal/DX12 driver is installed).
pub fn adapters() -> Vec<AdapterSummary> {
    let inst = instance();
    pollster::block_on(inst.enumerate_adapters(::wgpu::Backends::all()))
        .iter()
        .map(summarize)
        .collect()
}

/// The adapters whose name contains `name` (case-insensitive); an error naming the adapters there are when
/// none matches.
pub fn matching(name: &str) -> Result<Vec<AdapterSummary>> {
    let all = adapters();
    let want = name.to_lowercase();
    let hits: Vec<AdapterSummary> = all
        .iter()
        .filter(|a| a.name.to_lowercase().contains(&want))
        .cloned()
        .collect();
    if hits.is_empty() {
        let names: Vec<&str> = all.iter().map(|a| a.name.as_str()).collect();
        return Err(Error::Input {
            name: format!("--adapter {name}"),
            reason: if names.is_empty() {
                "no wgpu adapter at all on this machine\n  hint: install a Vulkan driver (Debian: apt-get install \
                 mesa-vulkan-drivers for lavapipe, a software Vulkan device)"
                    .into()
            } else {
                format!(
                    "no adapter's name contains it; there are: {}\n  hint: run `phantom devices`",
                    names.join(", ")
                )
            },
        });
    }
    Ok(hits)
}

/// The adapter to run on: the first whose name contains `name`, or the best there is (discrete, integrated,
/// virtual, then CPU).
pub fn pick(name: Option<&str>) -> Result<::wgpu::Adapter> {
    let inst = instance();
    let all = pollster::block_on(inst.enumerate_adapters(::wgpu::Backends::all()));
    let rank = |a: &::wgpu::Adapter| match a.get_info().device_type {
        ::wgpu::DeviceType::DiscreteGpu => 0,
        ::wgpu::DeviceType::IntegratedGpu => 1,
        ::wgpu::DeviceType::VirtualGpu => 2,
        ::wgpu::DeviceType::Cpu => 3,
        ::wgpu::DeviceType::Other => 4,
    };
    let want = name.map(str::to_lowercase);
    let mut hits: Vec<::wgpu::Adapter> = all
        .into_iter()
        .filter(|a| {
            want.as_ref()
                .is_none_or(|w| a.get_info().name.to_lowercase().contains(w))
        })
        .collect();
    hits.sort_by_key(rank);
    match hits.into_iter().next() {
        Some(a) => Ok(a),
        None => {
            // Same wording as `phantom devices --adapter`.
            matching(name.unwrap_or(""))?;
            Err(Error::Input {
                name: "--adapter".into(),
                reason: "no wgpu adapter".into(),
            })
        }
    }
}
