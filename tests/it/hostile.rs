//! Hostile and absurd input (issue 20): one regression test per kind — panics, aborts, engine panics reached
//! without validation, hangs, runaway memory, vacuous verdicts, unhelpful messages, leftovers. Every case is exit 2
//! with the file, node or option named, never a crash, a hang or a CLEAN.

use std::path::{Path, PathBuf};

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// Runs phantom with `args` and asserts exit 2, no panic text, and that stderr names each of `names`.
fn refused(args: &[&str], names: &[&str]) -> String {
    let (code, out, err) = phantom(args);
    if std::env::var_os("PHANTOM_SHOW_ERRORS").is_some() {
        println!("phantom {}\n{err}", args.join(" "));
    }
    assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{args:?}: {err}"
    );
    for n in names {
        assert!(
            err.contains(n),
            "{args:?}: stderr does not name `{n}`: {err}"
        );
    }
    err
}

/// `x[1, 3, 8, 8] → <op> → y` with `attrs`, opset 17.
fn one_node(
    dir: &Path,
    file: &str,
    op: &str,
    attrs: Vec<pb::AttributeProto>,
    extra: Vec<pb::TensorProto>,
) -> PathBuf {
    let mut inputs = vec!["x".to_string()];
    inputs.extend(extra.iter().map(|t| t.name.clone()));
    let n = pb::NodeProto {
        name: "suspect".into(),
        op_type: op.into(),
        input: inputs,
        output: vec!["y".into()],
        attribute: attrs,
        ..Default::default()
    };
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![n],
        initializer: extra,
        input: vec![value("x", &[1, 3, 8, 8])],
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    write_model(&dir.join(file), g, 17)
}

fn conv_weights() -> pb::TensorProto {
    f32_tensor("w", vec![3, 3, 3, 3], vec![0.1; 81])
}

#[test]
fn absurd_numbers_on_the_command_line_are_refused() {
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    refused(&["onnx", m, "--val-range=-inf,inf"], &["--val-range"]);
    refused(
        &["onnx", m, "--dim", "batch=9223372036854775807"],
        &["image", "more bytes than can be addressed"],
    );
    refused(
        &["onnx", m, "--dim", "batch=99999999999"],
        &["image", "GiB", "--dim"],
    );
    refused(
        &["onnx", m, "--dim", "batch=-1"],
        &["--dim batch=-1", "negative"],
    );
    refused(&["onnx", m, "--dim", "bacth=2"], &["bacth", "batch"]);
    refused(
        &["onnx", m, "--shape", "imag=1x3x32x32"],
        &["imag", "image"],
    );
    refused(&["onnx", m, "--slice", "5:2"], &["5:2", "selects nothing"]);
    refused(
        &["onnx", m, "--slice", "1000"],
        &["--slice 1000", "nothing was compared"],
    );
    refused(&["onnx", m, "--atol", "nan"], &["--atol"]);
    // An integer input cannot take values beyond its type (nor beyond what f64 holds exactly).
    let dir = tempfile::tempdir().unwrap();
    let mut cast = node("Cast", &["n"], "y");
    cast.attribute = vec![attr_int("to", 1)];
    let mut n = value("n", &[4]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        n.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 7;
    }
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![cast],
        input: vec![n],
        output: vec![value("y", &[4])],
        ..Default::default()
    };
    let ints = write_model(&dir.path().join("ints.onnx"), g, 17);
    let ints = ints.to_str().unwrap();
    refused(
        &[
            "run",
            ints,
            "--val-range",
            "1e30,2e30",
            "--runner",
            "reference",
        ],
        &["n", "--val-range"],
    );
    let (code, out, err) = phantom(&["run", ints, "--val-range", "-5,5", "--runner", "reference"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn huge_declarations_in_files_are_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    // An .npy declaring 2^62 × 4 elements.
    let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }";
    let h = format!("{h}{}\n", " ".repeat(128 - 10 - h.len() - 1));
    let npy = dir.path().join("big.npy");
    std::fs::write(
        &npy,
        [
            b"\x93NUMPY\x01\x00".as_slice(),
            &(h.len() as u16).to_le_bytes(),
            h.as_bytes(),
            &[0; 16],
        ]
        .concat(),
    )
    .unwrap();
    refused(
        &["onnx", m, "--input", &format!("image={}", npy.display())],
        &["big.npy", "more elements"],
    );
    // A TensorProto whose dims overflow, and one whose external data offset does.
    let tds = dir.path().join("tds");
    std::fs::create_dir(&tds).unwrap();
    let t = f32_tensor("image", vec![1 << 62, 1 << 62], vec![]);
    std::fs::write(tds.join("input_0.pb"), t.encode_to_vec()).unwrap();
    refused(
        &["onnx", m, "--input", tds.to_str().unwrap()],
        &["input_0.pb"],
    );
    let mut t = f32_tensor("image", vec![1, 3, 32, 32], vec![]);
    t.data_location = Some(1);
    let kv = |k: &str, v: &str| pb::StringStringEntryProto {
        key: k.into(),
        value: v.into(),
    };
    t.external_data = vec![
        kv("location", "/dev/zero"),
        kv("offset", "18446744073709551615"),
    ];
    std::fs::write(tds.join("input_0.pb"), t.encode_to_vec()).unwrap();
    refused(
        &["onnx", m, "--input", tds.to_str().unwrap()],
        &["/dev/zero"],
    );
    t.external_data = vec![kv("location", "/dev/zero"), kv("length", "12288")];
    std::fs::write(tds.join("input_0.pb"), t.encode_to_vec()).unwrap();
    refused(
        &["onnx", m, "--input", tds.to_str().unwrap()],
        &["/dev/zero", "not a regular file"],
    );
    // Special files and an empty .pb.
    refused(&["info", "/dev/zero"], &["/dev/zero", "regular file"]);
    refused(&["onnx", m, "--input", "image=/dev/zero"], &["/dev/zero"]);
    std::fs::write(tds.join("input_0.pb"), b"").unwrap();
    refused(
        &["onnx", m, "--input", tds.to_str().unwrap()],
        &["input_0.pb", "empty"],
    );
    // A model declaring a 1×3×20000×20000 input.
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![node("Relu", &["x"], "y")],
        input: vec![value("x", &[1, 3, 20000, 20000])],
        output: vec![value("y", &[1, 3, 20000, 20000])],
        ..Default::default()
    };
    let big = write_model(&dir.path().join("big.onnx"), g, 17);
    refused(&["onnx", big.to_str().unwrap()], &["x", "20000", "--shape"]);
}

/// A zip bomb inside an .npz: its entry inflates beyond the input budget (lowered here to keep the file small).
#[test]
fn a_zip_bomb_npz_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("bomb.npz");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&npz).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("image.npy", opts).unwrap();
    let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4194304,), }";
    let h = format!("{h}{}\n", " ".repeat(128 - 10 - h.len() - 1));
    use std::io::Write;
    zip.write_all(
        &[
            b"\x93NUMPY\x01\x00".as_slice(),
            &(h.len() as u16).to_le_bytes(),
            h.as_bytes(),
        ]
        .concat(),
    )
    .unwrap();
    zip.write_all(&vec![0u8; 16 << 20]).unwrap();
    zip.finish().unwrap();
    assert!(std::fs::metadata(&npz).unwrap().len() < 1 << 20);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args([
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--input",
            npz.to_str().unwrap(),
        ])
        .env("PHANTOM_MEMORY_BUDGET", "32MiB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bomb.npz") && err.contains("unpacks to"),
        "{err}"
    );
}

/// What ONNX Runtime would refuse never reaches tract or the shaders: every path (the wgpu target, `run --runner
/// reference`, `--target-model`) gets exit 2 naming the node and attribute.
#[test]
fn invalid_models_are_refused_on_every_path() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            one_node(
                d,
                "stride0.onnx",
                "Conv",
                vec![attr_ints("strides", &[0, 1])],
                vec![conv_weights()],
            ),
            "strides",
        ),
        (
            one_node(
                d,
                "kernel.onnx",
                "Conv",
                vec![attr_ints("kernel_shape", &[])],
                vec![conv_weights()],
            ),
            "kernel_shape",
        ),
        (
            one_node(
                d,
                "pad.onnx",
                "Conv",
                vec![attr_str("auto_pad", "BOGUS")],
                vec![conv_weights()],
            ),
            "BOGUS",
        ),
        (
            one_node(
                d,
                "perm.onnx",
                "Transpose",
                vec![attr_ints("perm", &[0, 1, 2, 7])],
                vec![],
            ),
            "perm",
        ),
        (
            one_node(
                d,
                "softmax.onnx",
                "Softmax",
                vec![attr_int("axis", 99)],
                vec![],
            ),
            "axis",
        ),
        (
            one_node(
                d,
                "layernorm.onnx",
                "LayerNormalization",
                vec![attr_int("axis", -7)],
                vec![],
            ),
            "axis",
        ),
        (
            one_node(
                d,
                "expand.onnx",
                "Expand",
                vec![],
                vec![i64_tensor("s", vec![4], vec![1 << 20, 1 << 20, 8, 8])],
            ),
            "shape",
        ),
    ];
    for (m, attr) in &cases {
        let m = m.to_str().unwrap();
        for args in [
            vec!["onnx", m, "--ep", "wgpu"],
            vec!["run", m, "--runner", "reference"],
            vec!["onnx", m, "--target-model", m],
        ] {
            refused(&args, &["suspect", attr]);
        }
    }
    // Opset 99 and an unknown domain.
    let g = |op: &str, domain: &str| pb::GraphProto {
        name: "g".into(),
        node: vec![pb::NodeProto {
            domain: domain.into(),
            ..node(op, &["x"], "y")
        }],
        input: vec![value("x", &[1, 4])],
        output: vec![value("y", &[1, 4])],
        ..Default::default()
    };
    let m = write_model(&d.join("opset99.onnx"), g("Relu", ""), 99);
    refused(
        &["run", m.to_str().unwrap(), "--runner", "reference"],
        &["opset 99"],
    );
    let m = write_model(&d.join("domain.onnx"), g("Relu", "com.example.custom"), 17);
    refused(&["info", m.to_str().unwrap()], &["com.example.custom"]);
}

/// An `If` whose branches produce different numbers of outputs.
#[test]
fn if_branches_that_disagree_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let branch = |outs: usize| pb::GraphProto {
        name: "b".into(),
        node: vec![node("Relu", &["x"], "r")],
        output: (0..outs).map(|_| value("r", &[1, 4])).collect(),
        ..Default::default()
    };
    let graph_attr = |name: &str, g: pb::GraphProto| pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Graph as i32,
        g: Some(g),
        ..Default::default()
    };
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![pb::NodeProto {
            name: "suspect".into(),
            op_type: "If".into(),
            input: vec!["c".into()],
            output: vec!["y".into()],
            attribute: vec![
                graph_attr("then_branch", branch(1)),
                graph_attr("else_branch", branch(2)),
            ],
            ..Default::default()
        }],
        initializer: vec![pb::TensorProto {
            name: "c".into(),
            data_type: 9,
            dims: vec![],
            int32_data: vec![1],
            ..Default::default()
        }],
        input: vec![value("x", &[1, 4])],
        output: vec![value("y", &[1, 4])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("if.onnx"), g, 17);
    refused(
        &["run", m.to_str().unwrap(), "--runner", "reference"],
        &["suspect", "branches"],
    );
}

/// Unnamed nodes in a cycle are named by index and op; duplicate inputs are refused naming both files.
#[test]
fn messages_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let unnamed = |op: &str, i: &[&str], o: &str| pb::NodeProto {
        name: String::new(),
        ..node(op, i, o)
    };
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![
            unnamed("Relu", &["b"], "a"),
            unnamed("Relu", &["a"], "b"),
            unnamed("Relu", &["x"], "y"),
        ],
        input: vec![value("x", &[1, 4])],
        output: vec![value("y", &[1, 4])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("cycle.onnx"), g, 17);
    refused(
        &["info", m.to_str().unwrap()],
        &["cycle", "node #0 (Relu)", "node #1 (Relu)"],
    );
    let tds = dir.path().join("tds");
    std::fs::create_dir(&tds).unwrap();
    let t = f32_tensor("image", vec![1, 3, 32, 32], vec![0.5; 3072]);
    std::fs::write(tds.join("input_0.pb"), t.encode_to_vec()).unwrap();
    std::fs::write(tds.join("input_1.pb"), t.encode_to_vec()).unwrap();
    refused(
        &[
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--input",
            tds.to_str().unwrap(),
        ],
        &["image", "given twice", "input_0.pb", "input_1.pb"],
    );
    let (code, _, err) = phantom(&[
        "check",
        model("convnet.onnx").to_str().unwrap(),
        "--golden",
        "nowhere",
        "--budget",
        "nan",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--budget"), "{err}");
}

/// A report path that is a directory or unwritable: exit 2 naming the path and saying write; no temporary left.
#[test]
fn failed_writes_leave_nothing_behind() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let target = dir.path().join("reports");
    std::fs::create_dir(&target).unwrap();
    for flag in ["--html", "--junit", "--summary-md", "--dot", "--json"] {
        refused(
            &["onnx", m.to_str().unwrap(), flag, target.to_str().unwrap()],
            &[flag, "directory"],
        );
    }
    let dangling = dir.path().join("dangling.html");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    refused(
        &[
            "onnx",
            m.to_str().unwrap(),
            "--html",
            dangling.to_str().unwrap(),
        ],
        &["cannot write", "dangling.html"],
    );
    std::fs::remove_file(&dangling).unwrap();
    let missing = dir.path().join("no/such/dir/r.json");
    refused(
        &[
            "onnx",
            m.to_str().unwrap(),
            "--json",
            missing.to_str().unwrap(),
        ],
        &["cannot write", "r.json"],
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("reports")],
        "leftovers: {left:?}"
    );
}

/// A `Loop` whose trip count never ends on ONNX Runtime: the watchdog stops it, naming the stage.
#[test]
fn a_stage_that_never_ends_is_stopped_by_the_timeout() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let body = pb::GraphProto {
        name: "body".into(),
        node: vec![
            node("Identity", &["cond_in"], "cond_out"),
            node("Add", &["acc_in", "one"], "acc_out"),
        ],
        input: vec![
            pb::ValueInfoProto {
                name: "i".into(),
                ..Default::default()
            },
            pb::ValueInfoProto {
                name: "cond_in".into(),
                ..Default::default()
            },
            value("acc_in", &[1]),
        ],
        output: vec![
            pb::ValueInfoProto {
                name: "cond_out".into(),
                ..Default::default()
            },
            value("acc_out", &[1]),
        ],
        initializer: vec![f32_tensor("one", vec![1], vec![1.0])],
        ..Default::default()
    };
    let mut i_in = body.input.clone();
    i_in[0] = int_value("i", 7);
    i_in[1] = int_value("cond_in", 9);
    let mut o = body.output.clone();
    o[0] = int_value("cond_out", 9);
    let body = pb::GraphProto {
        input: i_in,
        output: o,
        ..body
    };
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![pb::NodeProto {
            name: "forever".into(),
            op_type: "Loop".into(),
            input: vec!["n".into(), "t".into(), "x".into()],
            output: vec!["y".into()],
            attribute: vec![pb::AttributeProto {
                name: "body".into(),
                r#type: pb::attribute_proto::AttributeType::Graph as i32,
                g: Some(body),
                ..Default::default()
            }],
            ..Default::default()
        }],
        initializer: vec![
            i64_tensor("n", vec![], vec![i64::MAX]),
            pb::TensorProto {
                name: "t".into(),
                data_type: 9,
                dims: vec![],
                int32_data: vec![1],
                ..Default::default()
            },
        ],
        input: vec![value("x", &[1])],
        output: vec![value("y", &[1])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("loop.onnx"), g, 17);
    let t = std::time::Instant::now();
    let err = refused(
        &[
            "run",
            m.to_str().unwrap(),
            "--runner",
            "target",
            "--timeout",
            "3",
        ],
        &["--timeout 3s", "ONNX Runtime"],
    );
    assert!(t.elapsed().as_secs() < 30, "took {:?}: {err}", t.elapsed());
}

/// A scalar value of ONNX element type `elem`.
fn int_value(name: &str, elem: i32) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: elem,
                shape: Some(pb::TensorShapeProto { dim: vec![] }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Found by the mutation harness (seed 1 case 331, seed 3 case 274): an initializer whose dims overflow when
/// multiplied (in the validation pass, in `info`'s parameter count).
#[test]
fn initializers_with_absurd_dims_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(model("convnet.onnx")).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    g.initializer[0].dims.push(i64::MAX);
    let p = dir.path().join("dims.onnx");
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    let p = p.to_str().unwrap();
    refused(&["onnx", p, "-q", "--attribution", "off"], &["dims.onnx"]);
    refused(&["run", p, "--runner", "reference"], &["dims.onnx"]);
    let (code, out, err) = phantom(&["info", p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("parameters"), "{out}");
}

/// A value whose shape follows from the inputs (no constant the validation pass sees) and needs 64 GiB: an outer
/// product of a 2^17-element input. The reference refuses it after typing, naming the node, before allocating; a
/// size tract folds while typing (ConstantOfShape of a computed shape) fails its allocation inside the guard.
#[test]
fn computed_huge_shapes_are_refused_by_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = node("Transpose", &["x"], "t");
    t.attribute = vec![attr_ints("perm", &[1, 0])];
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![
            t,
            pb::NodeProto {
                name: "suspect".into(),
                ..node("MatMul", &["x", "t"], "y")
            },
        ],
        input: vec![value("x", &[1 << 17, 1])],
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("outer.onnx"), g, 17);
    refused(
        &["run", m.to_str().unwrap(), "--runner", "reference"],
        &["suspect", "beyond the memory"],
    );
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![
            node("Shape", &["x"], "s"),
            node("Mul", &["s", "k"], "big"),
            node("ConstantOfShape", &["big"], "y"),
        ],
        initializer: vec![i64_tensor("k", vec![2], vec![1 << 16, 1 << 16])],
        input: vec![value("x", &[4, 4])],
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("folded.onnx"), g, 17);
    refused(
        &["run", m.to_str().unwrap(), "--runner", "reference"],
        &["f64 reference", "allocate"],
    );
}

/// Gather with constant indices beyond the data, an initializer whose external data is `/dev/zero`: exit 2 on
/// every path, never a panic or an endless read.
#[test]
fn bad_indices_and_special_external_data_are_refused() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![pb::NodeProto {
            name: "suspect".into(),
            ..node("Gather", &["x", "idx"], "y")
        }],
        initializer: vec![i64_tensor("idx", vec![2], vec![0, 1 << 40])],
        input: vec![value("x", &[4, 3])],
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("gather.onnx"), g, 17);
    let m = m.to_str().unwrap();
    for args in [
        vec!["run", m, "--runner", "reference"],
        vec!["onnx", m, "--ep", "wgpu"],
        vec!["onnx", m],
    ] {
        refused(&args, &["suspect", "constant index 1099511627776"]);
    }
    let bytes = std::fs::read(model("convnet.onnx")).unwrap();
    let mut cm = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let t = &mut cm.graph.as_mut().unwrap().initializer[0];
    t.raw_data.clear();
    t.data_location = Some(1);
    t.external_data = vec![pb::StringStringEntryProto {
        key: "location".into(),
        value: "/dev/zero".into(),
    }];
    let p = dir.path().join("zero.onnx");
    std::fs::write(&p, cm.encode_to_vec()).unwrap();
    let p = p.to_str().unwrap();
    for args in [
        vec!["run", p, "--runner", "reference"],
        vec!["onnx", p, "--ep", "wgpu"],
        vec!["onnx", p],
    ] {
        refused(&args, &["error:"]);
    }
}

/// A golden record whose directory cannot be put in place leaves no hidden temporary directory.
#[test]
fn a_failed_record_leaves_no_temporary_directory() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let out = file.join("golden");
    refused(
        &[
            "record",
            model("convnet.onnx").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &["golden"],
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("taken")],
        "leftovers: {left:?}"
    );
}
