//! `phantom devices`: the wgpu adapters phantom can run shaders on, with the features and limits that matter.

use super::out::sayln;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::args::DevicesArgs;
use super::Outcome;
use crate::runner::wgpu::device::{adapters, matching};

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

pub fn run(a: DevicesArgs) -> anyhow::Result<Outcome> {
    let list = match &a.adapter {
        Some(n) => matching(n)?,
        None => adapters(),
    };
    if let Some(p) = &a.json.path {
        super::settings::emit_json(p, &list)?;
        return Ok(Outcome::Clean);
    }
    if list.is_empty() {
        sayln!(
            "no wgpu adapter found (phantom looks for Vulkan, Metal and DX12 drivers)\n  hint: on Debian, \
             `apt-get install mesa-vulkan-drivers` gives lavapipe, a software Vulkan device"
        );
        return Ok(Outcome::Clean);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "adapter",
        "backend",
        "type",
        "driver",
        "SHADER_F16",
        "storage binding",
        "buffer",
        "workgroup",
    ]);
    for d in &list {
        t.add_row(vec![
            d.name.clone(),
            d.backend.clone(),
            d.device_type.clone(),
            format!("{} {}", d.driver, d.driver_info),
            if d.shader_f16 { "yes" } else { "no (emulated)" }.to_string(),
            mib(d.max_storage_buffer_binding_size),
            mib(d.max_buffer_size),
            format!(
                "{} invocations, {}x{}x{}",
                d.max_compute_invocations_per_workgroup,
                d.max_compute_workgroup_size[0],
                d.max_compute_workgroup_size[1],
                d.max_compute_workgroup_size[2]
            ),
        ]);
    }
    sayln!("{t}");
    for d in &list {
        sayln!("{} features: {}", d.name, d.features.join(", "));
    }
    Ok(Outcome::Clean)
}
