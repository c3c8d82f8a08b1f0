//! One command-line vocabulary: `--json PATH` writes the file in every command (`-` or no PATH: standard output
//! where a command printed JSON before), and `--atol`/`--rtol` are one group, checked the same way everywhere.

use crate::common::{phantom, root};

#[test]
fn info_and_devices_write_json_to_a_path_or_print_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/convnet.onnx");
    let m = model.to_str().unwrap();
    let printed = |args: &[&str]| {
        let (code, out, err) = phantom(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let stdout = printed(&["info", m, "--json"]);
    assert!(stdout["nodes"].as_u64().unwrap() > 0, "{stdout}");
    assert_eq!(
        printed(&["info", "--json", m]),
        stdout,
        "the flag's older form"
    );
    assert_eq!(printed(&["info", m, "--json", "-"]), stdout);
    let file = dir.path().join("info.json");
    let (code, out, err) = phantom(&["info", m, "--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("\"nodes\""), "written, not printed: {out}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written, stdout);

    let listed = printed(&["devices", "--json"]);
    let file = dir.path().join("devices.json");
    let (code, _, err) = phantom(&["devices", "--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written, listed);
}

#[test]
fn a_negative_tolerance_is_refused_by_every_command_that_compares() {
    let dir = tempfile::tempdir().unwrap();
    let m = root().join("models/convnet.onnx");
    let m = m.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("mixed.onnx");
    let bundle = dir.path().join("bundle");
    let b = bundle.to_str().unwrap();
    for args in [
        vec!["onnx", m, "--atol=-1"],
        vec!["precision", m, "--out", out.to_str().unwrap(), "--rtol=-1"],
        vec!["diff", d, d, "--atol=-1"],
        vec!["reduce", m, "--out", b, "--rtol", "nan"],
    ] {
        let (code, _, err) = phantom(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("--atol") || err.contains("--rtol"),
            "{args:?}: {err}"
        );
    }
}

/// `onnx`, `merge` and `diff` take the same report flags: `--summary-md` and its other name `--markdown` write the
/// same file, and every report file is written by one emitter.
#[test]
fn the_report_flags_mean_the_same_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (crate::diff::data("tp1"), crate::diff::data("tp2"));
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (md, markdown, json, html) = (path("a.md"), path("b.md"), path("d.json"), path("d.html"));
    for flag in [vec!["--summary-md", &md], vec!["--markdown", &markdown]] {
        let mut args = vec!["diff", &a, &b];
        args.extend(flag);
        args.extend(["--json", &json, "--html", &html]);
        let (code, _, err) = phantom(&args);
        assert!(code == 0 || code == 1, "{err}");
    }
    let read = |p: &str| std::fs::read_to_string(p).unwrap();
    assert!(read(&md).contains('|'), "a Markdown table");
    assert_eq!(read(&md), read(&markdown));
    assert!(serde_json::from_str::<serde_json::Value>(&read(&json)).is_ok());
    assert!(read(&html).starts_with("<!"), "{}", &read(&html)[..40]);
}

/// Each file flag is one declaration: wherever `--json` or `--junit` appears, it has the same help, value name and
/// arity, so `--json -` (or a bare `--json`) prints in every command that writes JSON; `--target-model` too.
#[test]
fn each_output_flag_is_declared_once_and_means_the_same_everywhere() {
    use clap::CommandFactory;
    fn walk(c: &clap::Command, path: String, out: &mut Vec<(String, String, String)>) {
        for a in c.get_arguments() {
            let id = a.get_id().as_str();
            if ["json", "junit", "html", "summary_md", "target_model"].contains(&id) {
                let shape = format!(
                    "{:?} {:?} {:?}",
                    a.get_help().map(|h| h.to_string()),
                    a.get_value_names(),
                    a.get_num_args()
                );
                out.push((id.to_string(), path.clone(), shape));
            }
        }
        for s in c.get_subcommands() {
            walk(s, format!("{path} {}", s.get_name()), out);
        }
    }
    let mut found = vec![];
    walk(
        &phantom::cli::args::Cli::command(),
        "phantom".into(),
        &mut found,
    );
    let with = |id: &str| -> Vec<&str> {
        let mut v: Vec<&str> = found
            .iter()
            .filter(|f| f.0 == id)
            .map(|f| f.1.as_str())
            .collect();
        v.sort();
        v
    };
    for cmd in [
        "onnx",
        "merge",
        "diff",
        "determinism",
        "check",
        "scan",
        "profile",
        "info",
        "devices",
    ] {
        let c = format!("phantom {cmd}");
        assert!(with("json").contains(&c.as_str()), "{cmd} takes --json");
    }
    assert!(
        with("junit").contains(&"phantom check"),
        "check takes --junit"
    );
    for id in ["json", "junit", "html", "summary_md", "target_model"] {
        let shapes: std::collections::BTreeSet<&str> = found
            .iter()
            .filter(|f| f.0 == id)
            .map(|f| f.2.as_str())
            .collect();
        assert_eq!(
            shapes.len(),
            1,
            "--{id} is declared differently: {shapes:?}"
        );
    }
}

/// `--json -` takes standard output: it holds the JSON alone, the summary goes to standard error; two outputs
/// asking for standard output are refused before anything runs.
#[test]
fn json_on_standard_output_moves_the_summary_to_standard_error() {
    let model = root().join("models/convnet.onnx");
    let m = model.to_str().unwrap();
    let (code, out, err) = phantom(&["onnx", m, "--json", "-"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("stdout is the JSON alone");
    assert_eq!(report["verdict"]["status"], "clean", "{out}");
    assert!(
        err.contains("phantom ") && err.contains("CLEAN"),
        "the summary: {err}"
    );

    let (code, out, err) = phantom(&["scan", m, "--json"]);
    assert_eq!(code, 0, "{err}");
    let scan: serde_json::Value = serde_json::from_str(&out).expect("stdout is the scan alone");
    assert!(scan.is_object(), "{scan}");

    let (code, out, err) = phantom(&["onnx", m, "--json", "-", "--junit", "-"]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("--json and --junit"), "{err}");
}
