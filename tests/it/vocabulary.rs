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
