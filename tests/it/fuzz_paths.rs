//! The fuzz harness's mutations on two more paths: the readers alone, in-process, and the wgpu and
//! `--target-model` paths held to what ONNX Runtime's loader refuses.

use std::path::PathBuf;
use std::process::Command;

use prost::Message;
use rand::SeedableRng;
use tract_onnx::pb;

use super::fuzz::{env_num, mutate_bytes, mutate_structure, pick, run_case, Case, Rng};
use crate::common::*;

/// The readers alone, in-process: mutated .npy, TensorProto and model bytes never panic.
#[test]
fn readers_never_panic_on_mutated_bytes() {
    let mut rng = Rng::seed_from_u64(7);
    let npy =
        phantom::model::npy::to_npy(&phantom::tensor::Tensor::F32(ndarray::ArrayD::zeros(vec![
            2, 3,
        ])));
    let proto = f32_tensor("x", vec![2, 3], vec![1.0; 6]).encode_to_vec();
    let onnx = std::fs::read(model("convnet.onnx")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for k in 0..3000 {
        let (b, _) = mutate_bytes(&mut rng, npy.clone());
        let _ = phantom::model::npy::parse_npy("fuzz", &b);
        let (b, _) = mutate_bytes(&mut rng, proto.clone());
        if let Ok(t) = pb::TensorProto::decode(b.as_slice()) {
            let _ = phantom::model::proto::tensor_from_proto(&t, Some(dir.path()));
        }
        if k % 10 == 0 {
            let (b, _) = mutate_bytes(&mut rng, onnx.clone());
            let _ = phantom::model::import::from_bytes(&PathBuf::from("fuzz.onnx"), b);
        }
    }
}

/// The wgpu and `--target-model` paths hold models to ONNX Runtime's expectations (issue 32 item 6): a mutated
/// model that `phantom onnx` on ORT refuses with exit 2 (ORT's error or its loader's rules) is refused with exit 2 on `--ep wgpu` and as a
/// `--target-model` too, never compared with exit 0 or 1. `PHANTOM_FUZZ_ORT_CASES` sets the count (default 40).
#[test]
fn what_ort_refuses_every_path_refuses() {
    ensure_runtime();
    let cases = env_num("PHANTOM_FUZZ_ORT_CASES", 40) as usize;
    let seed = env_num("PHANTOM_FUZZ_SEED", 20261126);
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::seed_from_u64(seed);
    let run = |args: Vec<String>, limit_memory: bool| {
        run_case(&Case {
            what: String::new(),
            args,
            limit_memory,
        })
    };
    let (mut refused, mut failures) = (0, vec![]);
    for k in 0..cases {
        let base = *pick(&mut rng, &["convnet.onnx", "encoder.onnx"]);
        let mut m = pb::ModelProto::decode(std::fs::read(model(base)).unwrap().as_slice()).unwrap();
        let what = mutate_structure(&mut rng, &mut m);
        let p = tmp.path().join(format!("m{k}.onnx"));
        std::fs::write(&p, m.encode_to_vec()).unwrap();
        let p = p.display().to_string();
        let quiet = ["-q", "--attribution", "off", "--timeout", "30"].map(String::from);
        let ort = Command::new(env!("CARGO_BIN_EXE_phantom"))
            .args(["onnx", &p])
            .args(&quiet)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        // Refused by ONNX Runtime or by the checks that stand in for its loader, not by the f64 reference alone
        // (tract refuses `transB = 99`, which ORT reads as true: a target model may carry it).
        let err = String::from_utf8_lossy(&ort.stderr);
        if ort.status.code() != Some(2) || err.contains("the f64 reference") {
            continue;
        }
        refused += 1;
        let clean = model(base).display().to_string();
        let paths = [
            vec!["onnx".into(), p.clone(), "--ep".into(), "wgpu".into()],
            vec!["onnx".into(), clean, "--target-model".into(), p.clone()],
        ];
        for args in paths {
            let args = [args, quiet.to_vec()].concat();
            match run(args.clone(), false) {
                Ok(2) => {}
                other => failures.push(format!(
                    "case {k} ({base}: {what}): ORT refuses it, `phantom {}` gave {other:?}",
                    args.join(" ")
                )),
            }
        }
    }
    println!(
        "{cases} cases (seed {seed}): ORT refused {refused}, failures {}",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        refused > cases / 5,
        "too few refusals to test anything: {refused}"
    );
}
