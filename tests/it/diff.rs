//! `phantom diff` on dumps built by tests/data/diff/make_dumps.py: a TP=2 run against a TP=1 run with one layer
//! off, a transposed tensor, a fused residual, bf16 tensors, archives, and hostile inputs.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::phantom;

pub(crate) fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/diff")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Runs `phantom diff` with a JSON report; returns (exit code, terminal output, report).
pub(crate) fn diff(args: &[&str]) -> (i32, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("d.json");
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    all.extend(["--json", json.to_str().unwrap()]);
    let (code, out, err) = phantom(&all);
    let report = std::fs::read_to_string(&json)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    (code, format!("{out}{err}"), report)
}

pub(crate) fn pair<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pair {name}: {r}"))
}

#[test]
fn tensor_parallel_shards_are_joined_and_the_divergent_layer_named() {
    for a in ["tp1", "tp1.zip", "tp1.tar.gz"] {
        let (code, out, r) = diff(&[
            &data(a),
            &data("tp2"),
            "--order",
            "layer{layer}_{stage}",
            "--stages",
            "attn,mlp",
        ]);
        assert_eq!(code, 1, "{out}");
        assert_eq!(r["verdict"]["first_divergent"], "layer2_mlp", "{out}");
        assert_eq!(r["verdict"]["failed"], 1, "{out}");
        let names: Vec<&str> = r["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names[..3],
            ["layer0_attn", "layer0_mlp", "layer1_attn"],
            "report order"
        );
        let bad = pair(&r, "layer2_mlp");
        assert!(
            (bad["metrics"]["max_abs"].as_f64().unwrap() - 1e-2).abs() < 1e-6,
            "{bad}"
        );
        assert_eq!(
            bad["transforms"][0],
            "B: 2 shards joined along axis 2 → [2, 3, 8]"
        );
        // B wrote layer1_attn sequence-first: joined, then A's leading axes permuted to B's layout.
        let t = pair(&r, "layer1_attn");
        assert_eq!(t["status"], "pass", "{t}");
        assert!(
            t["transforms"][1]
                .as_str()
                .unwrap()
                .contains("axes permuted [1, 0, 2]"),
            "{t}"
        );
        assert!(out.contains("first divergent: `layer2_mlp`"), "{out}");
    }
}

#[test]
fn renames_and_unmatched_names_are_reported() {
    let (code, out, r) = diff(&[&data("tp1"), &data("tp2"), "--rename-b", "^layer3_=L3_"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["only_a"],
        serde_json::json!(["layer3_attn", "layer3_mlp"])
    );
    assert_eq!(r["only_b"], serde_json::json!(["L3_attn", "L3_mlp"]));
    assert!(
        out.contains("only in A (2): layer3_attn, layer3_mlp"),
        "{out}"
    );
}

#[test]
fn a_fused_residual_and_bf16_tensors_compare() {
    let (code, out, r) = diff(&[
        &data("unfused.npz"),
        &data("fused_bf16.safetensors"),
        "--sum",
        "attn+residual=hidden",
    ]);
    assert_eq!(code, 0, "{out}");
    let h = pair(&r, "hidden");
    assert_eq!(h["metrics"]["max_abs"], 0.0, "{h}");
    assert!(
        h["transforms"][0]
            .as_str()
            .unwrap()
            .contains("attn + residual"),
        "{h}"
    );
    // bf16 on B: within bf16's tolerance, but not equal.
    let l = pair(&r, "logits");
    assert_eq!(l["b_dtype"], "bf16");
    let max = l["metrics"]["max_abs"].as_f64().unwrap();
    assert!(max > 0.0 && max < 0.05, "{l}");
    // Without the sum rule, `hidden` has no partner and the parts are listed.
    let (_, _, r) = diff(&[&data("unfused.npz"), &data("fused_bf16.safetensors")]);
    assert_eq!(r["only_a"], serde_json::json!(["attn", "residual"]));
    assert_eq!(r["only_b"], serde_json::json!(["hidden"]));
}

#[test]
fn tolerances_decide_the_verdict() {
    let (code, out, _) = diff(&[&data("tp1"), &data("tp2"), "--atol", "0.02", "--rtol", "0"]);
    assert_eq!(code, 0, "a 1e-2 difference within atol 2e-2\n{out}");
}

#[test]
fn hostile_dumps_are_refused_with_the_file_named() {
    let ok = data("truncated_ok");
    for (file, says) in [
        ("evil.pt", "asks Python to call posix.system"),
        ("slip.zip", "zip-slip"),
        ("bomb.zip", "decompression bomb"),
        ("truncated", "x.npy"),
        ("notazip.zip", "not a readable zip archive"),
    ] {
        let (code, out, r) = diff(&[&data(file), &ok]);
        assert_eq!(code, 2, "{file}: {out}");
        assert!(out.contains(says), "{file}: {out}");
        assert!(
            out.contains(file.trim_end_matches('/')),
            "{file} named: {out}"
        );
        assert_eq!(r, Value::Null, "no report for {file}");
    }
    assert!(!PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/escaped.npy")
        .exists());
}

#[test]
fn the_value_inspector_jumps_to_the_largest_difference() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("d.html");
    let (code, out, r) = diff(&[&data("tp1"), &data("tp2"), "--html", html.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    for external in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!page.contains(external), "fetches {external}");
    }
    assert_eq!(
        page.matches("<details class=\"pair").count(),
        8,
        "a collapsible pair each"
    );
    let worst = pair(&r, "layer2_mlp")["worst"]["index"].clone();
    let worst: Vec<String> = worst
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();

    let Some(chrome) = crate::compare::chromium() else {
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-sync",
    ];
    let result = crate::compare::selftest(&chrome, &html, profile.path(), &args);
    assert_eq!(result["expanded"], true, "{result}");
    assert_eq!(
        result["hit"],
        worst.join(","),
        "the highlighted cell is the largest difference: {result}"
    );
    assert_eq!(result["collapsed"], true, "{result}");
    assert_eq!(
        result["errors"],
        serde_json::json!([]),
        "console errors: {result}"
    );
}

/// One HTTP/1.1 request to `addr`; returns (status, body).
fn http(addr: &str, method: &str, path: &str, body: &[u8], host: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = vec![];
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Starts `phantom serve` on a free loopback port; returns the process and its `host:port`.
fn start_serve(max_upload: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(["serve", "--port", "0", "--max-upload", max_upload])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    (child, addr)
}

#[test]
fn serve_compares_two_uploaded_archives_on_the_loopback() {
    let (mut child, addr) = start_serve("200K");
    let result = std::panic::catch_unwind(|| {
        let (code, page) = http(&addr, "GET", "/", b"", "127.0.0.1");
        assert_eq!(code, 200);
        assert!(page.contains("Drop two dumps"), "{page}");
        assert_eq!(
            http(&addr, "GET", "/", b"", "evil.example").0,
            403,
            "other host names are refused"
        );
        let (_, id) = http(&addr, "POST", "/session", b"", "localhost");
        for (side, file) in [("a", "tp1.zip"), ("b", "tp2.zip")] {
            let bytes = std::fs::read(data(file)).unwrap();
            let (code, n) = http(
                &addr,
                "POST",
                &format!("/upload?id={id}&side={side}&name={file}"),
                &bytes,
                "127.0.0.1",
            );
            assert_eq!((code, n), (200, bytes.len().to_string()));
        }
        let (code, report) = http(
            &addr,
            "POST",
            &format!("/run?id={id}"),
            b"--order layer{layer}_{stage}",
            "127.0.0.1",
        );
        assert_eq!(code, 200, "{report}");
        assert!(report.contains("first: layer2_mlp"), "{report}");
        // Over the upload limit: refused, naming the limit.
        let (_, id) = http(&addr, "POST", "/session", b"", "127.0.0.1");
        let big = vec![0u8; 300 * 1024];
        let (code, why) = http(
            &addr,
            "POST",
            &format!("/upload?id={id}&side=a&name=big.zip"),
            &big,
            "127.0.0.1",
        );
        assert_eq!(code, 413, "{why}");
        assert!(why.contains("limit"), "{why}");
        // Options that would write files here are refused.
        for side in ["a", "b"] {
            let bytes = std::fs::read(data("unfused.npz")).unwrap();
            http(
                &addr,
                "POST",
                &format!("/upload?id={id}&side={side}&name=x.npz"),
                &bytes,
                "127.0.0.1",
            );
        }
        let (code, why) = http(
            &addr,
            "POST",
            &format!("/run?id={id}"),
            b"--json /tmp/x.json",
            "127.0.0.1",
        );
        assert_eq!(code, 400, "{why}");
        assert!(why.contains("not accepted"), "{why}");
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn serve_page_in_a_browser_uploads_both_dumps_and_shows_the_report() {
    let Some(chrome) = crate::compare::chromium() else {
        return;
    };
    let (mut child, addr) = start_serve("200K");
    let big = tempfile::tempdir().unwrap();
    let big_zip = big.path().join("big.zip");
    std::fs::write(&big_zip, vec![0u8; 300 * 1024]).unwrap();
    let result = std::panic::catch_unwind(move || {
        let wait = std::time::Duration::from_secs(60);
        let url = format!("http://{addr}/");
        let mut page = crate::cdp::Browser::open(&chrome, &url);
        page.wait_for("document.getElementById('go') !== null", wait, "the page");
        assert_eq!(page.eval("document.getElementById('go').disabled"), true);
        page.set_files("#a input", &[data("tp1.zip")]);
        page.set_files("#b input", &[data("tp2.zip")]);
        assert_eq!(
            page.eval("document.getElementById('go').disabled"),
            false,
            "both files picked: the button is enabled"
        );
        let shown = page.eval("document.querySelector('#b span').textContent");
        let size = std::fs::metadata(data("tp2.zip")).unwrap().len();
        assert_eq!(shown, format!("tp2.zip ({size} bytes)").as_str());
        page.eval(
            "document.getElementById('opts').value='--order layer{layer}_{stage}';\
             document.getElementById('go').click(); true",
        );
        let html = page.wait_for(
            "document.getElementById('go') ? document.getElementById('err').textContent && \
             'ERROR ' + document.getElementById('err').textContent : document.documentElement.outerHTML",
            wait,
            "the report",
        );
        let html = html.as_str().unwrap();
        assert!(!html.starts_with("ERROR "), "{html}");
        assert!(
            html.contains("first: layer2_mlp"),
            "the report replaced the page"
        );
        assert!(page.errors.is_empty(), "console errors: {:?}", page.errors);
        // Over the limit: the page says why, and stays usable.
        page.call("Page.navigate", serde_json::json!({ "url": url }));
        page.wait_for(
            "document.readyState === 'complete' && document.getElementById('go') !== null",
            wait,
            "the page again",
        );
        page.set_files("#a input", &[data("tp1.zip")]);
        page.set_files("#b input", &[&big_zip]);
        page.eval("document.getElementById('go').click(); true");
        let err = page.wait_for(
            "document.getElementById('err').textContent",
            wait,
            "the error",
        );
        assert!(err.as_str().unwrap().contains("limit"), "{err}");
        assert_eq!(page.eval("document.getElementById('bar').hidden"), true);
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn a_phantom_dump_pairs_by_onnx_value_names() {
    crate::common::ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("dump");
    // Its values have names a file cannot carry (`noise/phantom_random/...`).
    let m = crate::common::model("noisy.onnx");
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap(), "--dump", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("index.json")).unwrap()).unwrap();
    let mut want: Vec<String> = index["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    want.sort();
    let target = index["values"][0]["targets"][0][1]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let (code, out, r) = diff(&[
        d.join("reference").to_str().unwrap(),
        d.join(&target).to_str().unwrap(),
    ]);
    let mut got: Vec<String> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    assert_eq!(got, want, "{out}");
    assert!(
        got.iter().any(|n| n.contains('/')),
        "ONNX names, not file names: {got:?}"
    );
    // The f64 reference against ORT's fp32 values: within fp32's tolerance, as `phantom onnx` found.
    assert_eq!(code, 0, "{out}");
    assert!(
        r["only_a"].as_array().unwrap().is_empty() && r["only_b"].as_array().unwrap().is_empty()
    );
}

#[test]
fn a_legacy_torch_file_reads_the_same_values() {
    // torch.save's pre-1.6 layout (five pickles, then raw storages) against the same tensors in an .npz.
    let (code, out, r) = diff(&[&data("unfused.npz"), &data("legacy.pt")]);
    assert_eq!(code, 0, "{out}");
    let pairs = r["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3, "{out}");
    assert!(
        pairs
            .iter()
            .all(|p| p["metrics"]["max_abs"] == 0.0 && p["metrics"]["elements"] == 32),
        "{out}"
    );
}
