//! wgpu target throughput: the matmul and conv shaders (GFLOP/s, kernel only: inputs stay on the device, one wait
//! per batch of dispatches) in f32, f16 with f32 accumulation and f16 with f16 accumulation; then end-to-end model
//! time (`WgpuRunner::run`: every node dispatched and every value read back, as `phantom onnx --ep wgpu` does).
//!
//! `cargo bench --bench wgpu_throughput [-- MODEL.onnx ...]` (release). Prints one line per measurement. Sizes:
//! `PHANTOM_BENCH_MATMUL=256,512,1024` (square n×n×n) and `PHANTOM_BENCH_CONV=64` (channels of a 3×3 convolution
//! on 56×56). `benches/vendor_gemm.py` measures the vendor library at the same sizes and prints the ratios.

use std::time::Instant;

use phantom::runner::wgpu::gpu::{Buf, Gpu};
use phantom::runner::wgpu::{device, Accum, Mode};

fn random(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

fn upload(gpu: &Gpu, v: &[f32]) -> Buf {
    let bytes: Vec<u8> = match gpu.mode {
        Mode::F16Native => v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())
            .collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    gpu.upload(&bytes)
}

/// Seconds per dispatch of `shader`: one warm-up, then as many repetitions as fill about half a second
/// (at least `min_reps`), averaged.
#[allow(clippy::too_many_arguments)]
fn time(
    gpu: &Gpu,
    shader: &str,
    entry: &'static str,
    p: &[u32],
    ins: &[Option<&Buf>],
    out: &Buf,
    g: [u32; 3],
    min_reps: usize,
) -> f64 {
    let run = |k: usize| {
        let mut enc = gpu.encoder("bench");
        for _ in 0..k {
            gpu.dispatch(&mut enc, shader, entry, p, ins, out, g, "bench")
                .unwrap();
        }
        gpu.submit(enc);
        gpu.read(&[(out, 4)]).unwrap();
    };
    let t = Instant::now();
    run(1);
    let once = t.elapsed().as_secs_f64();
    let reps = ((0.5 / once) as usize).clamp(min_reps, 200);
    let t = Instant::now();
    run(reps);
    t.elapsed().as_secs_f64() / reps as f64
}

fn matmul(gpu: &Gpu, n: usize) -> f64 {
    let a = upload(gpu, &random(n * n, 1));
    let b = upload(gpu, &random(n * n, 2));
    let y = gpu.alloc((n * n) as u64 * gpu.mode.elem_bytes());
    let mut p = vec![0u32; 31];
    p[0] = n as u32;
    p[1] = n as u32;
    p[2] = n as u32;
    p[4] = n as u32;
    p[5] = 1;
    p[6] = n as u32;
    p[7] = 1;
    p[27] = 1f32.to_bits();
    let g = [n.div_ceil(64) as u32, n.div_ceil(64) as u32, 1];
    let s = time(
        gpu,
        "linalg/matmul",
        "main",
        &p,
        &[Some(&a), Some(&b), None],
        &y,
        g,
        2,
    );
    2.0 * (n as f64).powi(3) / s / 1e9
}

/// GFLOP/s of the direct and the implicit-GEMM convolution shaders.
fn conv(gpu: &Gpu, c: usize, hw: usize) -> (f64, f64) {
    let x = upload(gpu, &random(c * hw * hw, 3));
    let w = upload(gpu, &random(c * c * 9, 4));
    let y = gpu.alloc((c * hw * hw) as u64 * gpu.mode.elem_bytes());
    let n = c * hw * hw;
    let p: Vec<u32> = vec![
        n as u32, c as u32, hw as u32, hw as u32, c as u32, hw as u32, hw as u32, 3, 3, 1, 1, 1, 1,
        1, 1, 1, 0, 1,
    ];
    let flops = 2.0 * (n * c * 9) as f64;
    let ins = [Some(&x), Some(&w), None];
    let direct = time(gpu, "conv/conv", "conv", &p, &ins, &y, Gpu::groups_1d(n), 3);
    let g = [(hw * hw).div_ceil(64) as u32, c.div_ceil(64) as u32, 1];
    let gemm = time(gpu, "conv/conv", "conv_gemm", &p, &ins, &y, g, 3);
    (flops / direct / 1e9, flops / gemm / 1e9)
}

/// Sizes from a comma-separated environment variable (`PHANTOM_BENCH_MATMUL=1024,4096`), else `default`.
fn sizes(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    let adapter =
        device::pick(std::env::var("PHANTOM_ADAPTER").ok().as_deref()).expect("a wgpu adapter");
    let info = adapter.get_info();
    println!(
        "adapter: {} ({:?}, {})",
        info.name, info.backend, info.driver_info
    );
    let f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
    let mut modes = vec![(Mode::F32, Accum::F32, "f32")];
    let h = if f16 {
        Mode::F16Native
    } else {
        Mode::F16Emulated
    };
    modes.push((h, Accum::F32, "f16 storage, f32 accumulate"));
    modes.push((h, Accum::Storage, "f16 storage, f16 accumulate"));
    for (mode, acc, label) in modes {
        let gpu = Gpu::open(&adapter, mode, acc).expect("device");
        for n in sizes("PHANTOM_BENCH_MATMUL", &[256, 512, 1024]) {
            println!("matmul {n}x{n}x{n} {label}: {:.2} GFLOP/s", matmul(&gpu, n));
        }
        for c in sizes("PHANTOM_BENCH_CONV", &[64]) {
            let (direct, gemm) = conv(&gpu, c, 56);
            println!(
                "conv 3x3 {c}ch 56x56 {label}: direct {direct:.2} GFLOP/s, implicit GEMM {gemm:.2} GFLOP/s"
            );
        }
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a.ends_with(".onnx"))
        .collect();
    let models = if args.is_empty() {
        vec!["models/convnet.onnx".to_string()]
    } else {
        args
    };
    let lib = phantom::runner::ort_lib::locate(None, false).expect("ONNX Runtime");
    for m in models {
        let graph = phantom::model::load(std::path::Path::new(&m)).expect("model");
        let inputs = phantom::model::inputs::prepare(&graph, &Default::default()).expect("inputs");
        for f16 in [false, true] {
            let opts = phantom::runner::wgpu::WgpuOptions {
                f16,
                ..Default::default()
            };
            let mut r = phantom::runner::wgpu::WgpuRunner::new(&opts, &lib).expect("runner");
            r.run(&graph, &inputs).expect("warm-up");
            let t = Instant::now();
            let out = r.run(&graph, &inputs).expect("run");
            println!(
                "model {m} ({} nodes) {}: {:.1} ms end to end, {} values read back",
                graph.nodes.len(),
                if f16 { "f16" } else { "f32" },
                t.elapsed().as_secs_f64() * 1e3,
                out.values.len()
            );
        }
    }
}
