//! A mutation harness that stays (issue 20): seeded mutations of the demo models (bytes, graph structure,
//! attributes, dims, initializers, opsets), of input files (npy, TensorProto) and of command-line values, each run
//! through a phantom command (`info`, `run --runner reference`, `onnx` on ORT, `onnx --ep wgpu`, `--precision fp16`, `--target-model`)
//! under a memory limit and `--timeout`. Every case must end with exit 0, 1 or 2, with no panic, signal, hang or
//! memory blow-up, and an exit 2 must say `error:`. `PHANTOM_FUZZ_CASES` sets the count (default 1000),
//! `PHANTOM_FUZZ_SEED` the seed, `PHANTOM_FUZZ_KEEP` a directory to keep the cases in. The readers are also fuzzed in-process (thousands of cases, no engine).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use prost::Message;
use rand::{RngExt, SeedableRng};
use tract_onnx::pb;

use crate::common::*;

pub(crate) type Rng = rand::rngs::StdRng;

/// One case: the command line and what was mutated.
pub(crate) struct Case {
    pub(crate) what: String,
    pub(crate) args: Vec<String>,
    pub(crate) limit_memory: bool,
}

pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn pick<'a, T>(rng: &mut Rng, v: &'a [T]) -> &'a T {
    &v[rng.random_range(0..v.len())]
}

fn absurd_int(rng: &mut Rng) -> i64 {
    *pick(
        rng,
        &[
            0,
            -1,
            -7,
            1,
            2,
            3,
            99,
            -99,
            1 << 40,
            i64::MAX,
            i64::MIN,
            65535,
        ],
    )
}

/// Mutates one attribute of a random node, or adds one that engines rely on.
fn mutate_attribute(rng: &mut Rng, g: &mut pb::GraphProto) -> String {
    let i = rng.random_range(0..g.node.len());
    let n = &mut g.node[i];
    if n.attribute.is_empty() || rng.random_bool(0.4) {
        let a = match rng.random_range(0..6) {
            0 => attr_int("axis", absurd_int(rng)),
            1 => attr_ints("perm", &[0, absurd_int(rng), 1]),
            2 => attr_ints("strides", &[absurd_int(rng), 1]),
            3 => attr_str("auto_pad", "BOGUS"),
            4 => attr_ints("kernel_shape", &[]),
            _ => attr_ints("axes", &[absurd_int(rng)]),
        };
        let what = format!(
            "node {} ({}) gets {} {:?}{}",
            n.name, n.op_type, a.name, a.ints, a.i
        );
        n.attribute.retain(|x| x.name != a.name);
        n.attribute.push(a);
        return what;
    }
    let k = rng.random_range(0..n.attribute.len());
    let a = &mut n.attribute[k];
    match rng.random_range(0..4) {
        0 => a.i = absurd_int(rng),
        1 => {
            a.ints = (0..rng.random_range(0..5))
                .map(|_| absurd_int(rng))
                .collect()
        }
        2 => a.f = *pick(rng, &[f32::NAN, f32::INFINITY, -1e30, 0.0]),
        _ => a.s = b"\xff\xfegarbage".to_vec(),
    }
    format!(
        "node {} ({}) attribute {} mutated",
        n.name, n.op_type, a.name
    )
}

/// Mutates the graph's structure: dims, initializers, opsets, domains, wiring.
pub(crate) fn mutate_structure(rng: &mut Rng, m: &mut pb::ModelProto) -> String {
    let g = m.graph.as_mut().unwrap();
    match rng.random_range(0..8) {
        0 => {
            let v = absurd_int(rng);
            let dims =
                g.input
                    .iter_mut()
                    .filter_map(|i| match i.r#type.as_mut()?.value.as_mut()? {
                        pb::type_proto::Value::TensorType(t) => t.shape.as_mut(),
                    });
            for s in dims {
                if let Some(d) = s.dim.last_mut() {
                    d.value = Some(pb::tensor_shape_proto::dimension::Value::DimValue(v));
                }
            }
            format!("input dims set to {v}")
        }
        1 if !g.initializer.is_empty() => {
            let k = rng.random_range(0..g.initializer.len());
            let t = &mut g.initializer[k];
            match rng.random_range(0..4) {
                0 => t.raw_data.truncate(t.raw_data.len() / 3),
                1 => t.dims.push(absurd_int(rng)),
                2 => t.data_type = rng.random_range(0..20),
                _ => {
                    t.data_location = Some(1);
                    t.external_data = vec![pb::StringStringEntryProto {
                        key: "location".into(),
                        value: "/dev/zero".into(),
                    }];
                }
            }
            format!("initializer {} mutated", t.name)
        }
        2 => {
            let v = *pick(rng, &[0, -1, 1, 6, 99, 1000]);
            m.opset_import[0].version = v;
            format!("opset {v}")
        }
        3 => {
            let i = rng.random_range(0..g.node.len());
            g.node[i].domain = pick(
                rng,
                &["com.example", "ai.onnx.ml", "com.microsoft", "\u{0}"],
            )
            .to_string();
            format!("node {} domain {}", g.node[i].name, g.node[i].domain)
        }
        4 => {
            let i = rng.random_range(0..g.node.len());
            let removed = g.node.remove(i);
            format!("node {} removed", removed.name)
        }
        5 => {
            let (i, j) = (
                rng.random_range(0..g.node.len()),
                rng.random_range(0..g.node.len()),
            );
            let out = g.node[j].output[0].clone();
            if let Some(x) = g.node[i].input.first_mut() {
                *x = out.clone();
            }
            format!("node {} reads {out}", g.node[i].name)
        }
        6 => {
            let i = rng.random_range(0..g.node.len());
            g.node[i].op_type =
                pick(rng, &["NoSuchOp", "Loop", "If", "Scan", "Resize", ""]).to_string();
            format!("node {} op {}", g.node[i].name, g.node[i].op_type)
        }
        _ => mutate_attribute(rng, g),
    }
}

/// Flips, truncates or extends the encoded bytes.
pub(crate) fn mutate_bytes(rng: &mut Rng, mut b: Vec<u8>) -> (Vec<u8>, String) {
    let what = match rng.random_range(0..3) {
        0 => {
            for _ in 0..rng.random_range(1..16) {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
            "bits flipped"
        }
        1 => {
            b.truncate(rng.random_range(0..b.len()));
            "truncated"
        }
        _ => {
            b.extend((0..rng.random_range(1..64)).map(|_| rng.random::<u8>()));
            "garbage appended"
        }
    };
    (b, what.to_string())
}

/// An .npy with a random (often absurd) header, or a mutated TensorProto, for the convnet input.
fn mutate_input(rng: &mut Rng, dir: &Path, k: usize) -> (String, String) {
    if rng.random_bool(0.5) {
        let dims: Vec<String> = (0..rng.random_range(0..5))
            .map(|_| absurd_int(rng).unsigned_abs().to_string())
            .collect();
        let descr = pick(rng, &["<f4", "<f8", "<i8", ">f4", "|b1", "<c8", "<U3"]);
        let h = format!(
            "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
            dims.join(", ")
        );
        let h = format!("{h}{}\n", " ".repeat((256 - 11 - h.len() % 256) % 256));
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        bytes.extend((0..rng.random_range(0..4096)).map(|_| rng.random::<u8>()));
        let p = dir.join(format!("in{k}.npy"));
        std::fs::write(&p, bytes).unwrap();
        return (
            format!("image={}", p.display()),
            format!("npy {descr} ({})", dims.join(",")),
        );
    }
    let mut t = f32_tensor("image", vec![1, 3, 32, 32], vec![0.5; 3072]);
    t.dims = (0..rng.random_range(0..5))
        .map(|_| absurd_int(rng))
        .collect();
    let (bytes, what) = mutate_bytes(rng, t.encode_to_vec());
    let d = dir.join(format!("tds{k}"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("input_0.pb"), bytes).unwrap();
    (
        d.display().to_string(),
        format!("TensorProto dims {:?}, {what}", t.dims),
    )
}

/// Absurd command-line values.
fn absurd_flags(rng: &mut Rng) -> (Vec<String>, String) {
    let f = match rng.random_range(0..6) {
        0 => vec!["--dim".into(), format!("batch={}", absurd_int(rng))],
        1 => vec![format!(
            "--val-range={},{}",
            absurd_int(rng),
            absurd_int(rng)
        )],
        2 => vec![format!("--slice={}:{}", absurd_int(rng), absurd_int(rng))],
        3 => vec![format!(
            "--atol={}",
            pick(rng, &["nan", "-1", "inf", "1e308"])
        )],
        4 => vec![
            "--shape".into(),
            format!(
                "image={}x3x{}x32",
                absurd_int(rng).unsigned_abs(),
                absurd_int(rng).unsigned_abs()
            ),
        ],
        _ => vec![
            "--max-memory".into(),
            pick(rng, &["0", "-5GiB", "1B", "nanGiB", "99999999TiB"]).to_string(),
        ],
    };
    let what = f.join(" ");
    (f, what)
}

/// Case `k`: a mutation and a command to run it through.
fn make_case(rng: &mut Rng, dir: &Path, k: usize) -> Case {
    let base = *pick(rng, &["convnet.onnx", "encoder.onnx"]);
    let mut m = pb::ModelProto::decode(std::fs::read(model(base)).unwrap().as_slice()).unwrap();
    let path = dir.join(format!("m{k}.onnx"));
    let mut extra: Vec<String> = vec![];
    let what = match rng.random_range(0..10) {
        0..=4 => {
            let w = mutate_structure(rng, &mut m);
            std::fs::write(&path, m.encode_to_vec()).unwrap();
            w
        }
        5 | 6 => {
            let (b, w) = mutate_bytes(rng, m.encode_to_vec());
            std::fs::write(&path, b).unwrap();
            w
        }
        7 if base == "convnet.onnx" => {
            std::fs::write(&path, m.encode_to_vec()).unwrap();
            let (input, w) = mutate_input(rng, dir, k);
            extra = vec!["--input".into(), input];
            w
        }
        _ => {
            std::fs::write(&path, m.encode_to_vec()).unwrap();
            let (f, w) = absurd_flags(rng);
            extra = f;
            w
        }
    };
    let p = path.display().to_string();
    let (mut args, limit_memory): (Vec<String>, bool) = match rng.random_range(0..20) {
        0..=3 => (vec!["info".into(), p], true),
        4..=9 => (
            vec!["run".into(), p, "--runner".into(), "reference".into()],
            true,
        ),
        10 => (
            vec!["onnx".into(), p, "-q".into(), "--ep".into(), "wgpu".into()],
            false,
        ),
        12 => (
            vec![
                "onnx".into(),
                p,
                "-q".into(),
                "--precision".into(),
                "fp16".into(),
            ],
            true,
        ),
        11 => {
            let clean = model(base).display().to_string();
            (
                vec![
                    "onnx".into(),
                    clean,
                    "-q".into(),
                    "--target-model".into(),
                    p,
                ],
                true,
            )
        }
        _ => (
            vec![
                "onnx".into(),
                p,
                "-q".into(),
                "--attribution".into(),
                "off".into(),
            ],
            true,
        ),
    };
    if args[0] != "info" {
        args.extend(extra);
    }
    args.extend(["--timeout".into(), "30".into()]);
    Case {
        what: format!("{base}: {what}"),
        args,
        limit_memory,
    }
}

/// Runs one case; `Err` says what went wrong.
pub(crate) fn run_case(c: &Case) -> Result<i32, String> {
    let exe = env!("CARGO_BIN_EXE_phantom");
    let mut cmd = match c.limit_memory {
        // 6 GiB of address space: a blow-up fails an allocation instead of taking the machine.
        true => {
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg("ulimit -v 6291456; exec \"$0\" \"$@\"")
                .arg(exe)
                .args(&c.args);
            sh
        }
        false => {
            let mut direct = Command::new(exe);
            direct.args(&c.args);
            direct
        }
    };
    let mut child = cmd
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            return Err("hung past 90 s despite --timeout".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    use std::io::Read;
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let code = status
        .code()
        .ok_or_else(|| format!("killed by a signal: {status:?}\n{err}"))?;
    if !(0..=2).contains(&code) {
        return Err(format!("exit {code}\n{err}"));
    }
    // A crash the signal handler turned into exit 2 is still a crash.
    if err.contains("panicked")
        || err.contains("internal error")
        || err.contains("phantom crashed with")
        || err.contains("memory allocation of")
    {
        return Err(format!("exit {code} with a crash report:\n{err}"));
    }
    if code == 2 && !err.starts_with("error: ") {
        return Err(format!("exit 2 without an error message:\n{err}"));
    }
    Ok(code)
}

#[test]
fn mutated_models_inputs_and_flags_never_crash() {
    ensure_runtime();
    let cases = env_num("PHANTOM_FUZZ_CASES", 1000) as usize;
    let seed = env_num("PHANTOM_FUZZ_SEED", 20261125);
    let tmp = tempfile::tempdir().unwrap();
    // PHANTOM_FUZZ_KEEP=DIR keeps the cases' files there, to turn a failure into a regression test.
    let keep = std::env::var_os("PHANTOM_FUZZ_KEEP").map(PathBuf::from);
    let dir = keep.as_deref().unwrap_or(tmp.path());
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = Rng::seed_from_u64(seed);
    let all: Vec<(usize, Case)> = (0..cases)
        .map(|k| (k, make_case(&mut rng, dir, k)))
        .collect();
    let started = Instant::now();
    let results: Vec<(usize, Result<i32, String>)> = std::thread::scope(|s| {
        let chunks: Vec<&[(usize, Case)]> = all.chunks(cases.div_ceil(2).max(1)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(k, c)| (*k, run_case(c)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut codes = [0usize; 3];
    let mut failures = vec![];
    for (k, r) in results {
        match r {
            Ok(c) => codes[c as usize] += 1,
            Err(why) => failures.push(format!(
                "case {k} ({}), `phantom {}`: {why}",
                all[k].1.what,
                all[k].1.args.join(" ")
            )),
        }
    }
    println!(
        "{cases} cases (seed {seed}) in {:.1} s: exit 0 ×{}, exit 1 ×{}, exit 2 ×{}, failures {}",
        started.elapsed().as_secs_f64(),
        codes[0],
        codes[1],
        codes[2],
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        codes[2] > cases / 4,
        "too few refusals for mutated input: {codes:?}"
    );
}
