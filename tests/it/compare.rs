//! End-to-end `phantom onnx` runs on the demo models: clean verdicts, a perturbed target named at the right
//! node, coverage and instrumentation figures in the JSON report.

use crate::common::*;

#[test]
fn demo_models_are_clean_against_ort_cpu() {
    ensure_runtime();
    for name in ["convnet.onnx", "encoder.onnx"] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let (code, out, err) = phantom(&[
            "onnx",
            model(name).to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{name}: expected clean\n{out}\n{err}");
        assert!(out.contains("CLEAN"), "{out}");
        let r = read_json(&json);
        assert_eq!(r["verdict"]["status"], "clean");
        let cov = &r["coverage"];
        assert_eq!(
            cov["compared"], cov["values"],
            "{name}: every value should be compared: {cov}"
        );
        assert_eq!(r["reference"]["name"], "tract-f64");
        assert_eq!(
            r["target"]["details"]["ep_requested"],
            "CPUExecutionProvider"
        );
        // Where the time went, by op type: every value counted once, under its producer's op type, and no more
        // time than the stage totals.
        let t = &r["timings"];
        let by_op = t["by_op"].as_object().unwrap();
        let nodes = r["nodes"].as_array().unwrap();
        for (op, o) in by_op.iter().filter(|(op, _)| op.as_str() != "(input)") {
            let produced: usize = nodes
                .iter()
                .filter(|n| n["op_type"] == op.as_str())
                .map(|n| n["values"].as_array().unwrap().len())
                .sum();
            assert_eq!(
                o["values"].as_u64().unwrap() as usize,
                produced,
                "{name}: {op}"
            );
        }
        let sum = |k: &str| by_op.values().map(|o| o[k].as_f64().unwrap()).sum::<f64>();
        assert!(
            sum("compare_ms") <= t["compare_ms"].as_f64().unwrap() + 1.0,
            "{name}: {t}"
        );
        assert!(
            sum("reference_ms") <= t["reference_ms"].as_f64().unwrap() + 1.0,
            "{name}: {t}"
        );
        assert!(
            by_op.contains_key("MatMul") || by_op.contains_key("Conv"),
            "{name}: {t}"
        );
        // fp32 ORT against f64: real but small differences, so the metrics are genuine, not zero.
        let out_val = r["nodes"].as_array().unwrap().last().unwrap()["values"][0].clone();
        let max_abs = out_val["metrics"]["max_abs"].as_f64().unwrap();
        assert!(
            max_abs > 0.0 && max_abs < 1e-5,
            "{name}: output max_abs {max_abs}"
        );
    }
}

#[test]
fn reference_uses_own_f64_kernels_where_tract_has_none() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (code, _, err) = phantom(&[
        "onnx",
        model("encoder.onnx").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let r = read_json(&json);
    let erf = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "gelu.erf")
        .unwrap();
    assert_eq!(erf["reference"]["kind"], "f64_phantom");
    // The f64 Erf differs from ORT's f32 Erf by f32-level error only.
    let m = &erf["values"][0]["metrics"];
    assert!(m["max_abs"].as_f64().unwrap() < 1e-6, "{m}");
}

#[test]
fn perturbed_target_model_is_named_as_first_divergence() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "expected drift\n{out}\n{err}");
    assert!(
        out.contains("first divergence: node #4 Conv `conv2`"),
        "{out}"
    );
    let xml_path = dir.path().join("r.xml");
    phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--junit",
        xml_path.to_str().unwrap(),
    ]);
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    assert!(
        xml.contains("<failure") && xml.contains("#4 Conv conv2 → c2"),
        "{xml}"
    );
    assert!(
        xml.contains("classname=\"phantom.output\""),
        "a case per model output: {xml}"
    );
    let r = read_json(&json);
    assert_eq!(r["verdict"]["first_divergence"]["node"], "conv2");
    assert_eq!(r["verdict"]["first_divergence"]["value"], "c2");
    // Nodes before conv2 stay clean.
    for n in r["nodes"].as_array().unwrap().iter().take(4) {
        assert_eq!(n["status"], "pass", "{}", n["name"]);
    }
}

#[test]
fn quiet_mode_prints_one_verdict_line() {
    ensure_runtime();
    let (code, out, _) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--quiet",
        "--seed",
        "3",
    ]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("clean:"));
}

#[test]
fn tight_tolerance_reports_drift_with_metrics() {
    ensure_runtime();
    let (code, out, _) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--atol",
        "0",
        "--rtol",
        "1e-12",
    ]);
    assert_eq!(code, 1, "f32 cannot meet 1e-12 against f64\n{out}");
    assert!(out.contains("DRIFT") && out.contains("max ulp"), "{out}");
}

#[test]
fn info_lists_inputs_outputs_and_ops() {
    let (code, out, err) = phantom(&["info", model("encoder.onnx").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("input_ids") && out.contains("i64") && out.contains("1x16"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("MatMul") && l.contains(" 8 ")),
        "{out}"
    );
}

#[test]
fn perturbed_node_of_a_real_model_is_named() {
    ensure_runtime();
    let real = root().join("tests/data/real/ppocr_cls_v2.onnx");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&real, "Conv@11", 1.01, &target);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        real.to_str().unwrap(),
        "--shape",
        "x=1x3x48x192",
        "--target-model",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "expected drift\n{out}\n{err}");
    let r = read_json(&json);
    assert_eq!(r["verdict"]["first_divergence"]["node"], "Conv@11", "{out}");
    assert_eq!(r["verdict"]["first_divergence"]["value"], "conv2d_61.tmp_0");
    assert_eq!(r["coverage"]["unchecked"], 0, "{}", r["coverage"]);
    // The same model against itself is clean: no false alarm on a real MobileNetV3.
    let (code, out, _) = phantom(&[
        "onnx",
        real.to_str().unwrap(),
        "--shape",
        "x=1x3x48x192",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn markdown_and_dot_renderings() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let (md, dot) = (dir.path().join("s.md"), dir.path().join("g.dot"));
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--summary-md",
        md.to_str().unwrap(),
        "--dot",
        dot.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.contains("**drift**") && md.contains("First divergence: node #4 `conv2` (Conv)"),
        "{md}"
    );
    assert!(md.contains("| 4 | Conv | `conv2` | `c2` |"), "{md}");
    let dot = std::fs::read_to_string(dot).unwrap();
    assert!(
        dot.starts_with("digraph phantom {") && dot.contains("n3 -> n4;"),
        "{dot}"
    );
    assert!(
        dot.contains("n4 [label=\"#4 Conv\\nconv2") && dot.contains("#ef9a9a"),
        "{dot}"
    );
    assert!(dot.contains("n0 [label=\"#0 Conv\\nconv1"), "{dot}");
}

/// Headless Chromium, if installed (CI installs it and then requires it).
pub(crate) fn chromium() -> Option<std::path::PathBuf> {
    let found = [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists());
    if found.is_none() && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but no Chromium: .ci/run installs Debian's chromium package");
    }
    found
}

/// Opens `html` at `#phantom-selftest` in headless Chromium (with `args`) and returns what the page's self-test
/// wrote into its title.
pub(crate) fn selftest(
    chrome: &std::path::Path,
    html: &std::path::Path,
    profile: &std::path::Path,
    args: &[&str],
) -> serde_json::Value {
    let url = format!("file://{}#phantom-selftest", html.display());
    let out = std::process::Command::new(chrome)
        .args(args)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let title = dom
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or("")
        .replace("&quot;", "\"");
    serde_json::from_str(title.trim_start_matches("SELFTEST "))
        .unwrap_or_else(|_| panic!("self-test did not run: {title}"))
}

#[test]
fn html_report_is_self_contained_and_works_in_a_browser() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let html = dir.path().join("report.html");
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    for external in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "@import",
        "url(http",
    ] {
        assert!(!page.contains(external), "fetches {external}");
    }
    assert!(
        page.contains("<svg id=\"chart\"")
            && page.contains("first divergence: node #4 Conv <code>conv2</code>")
    );
    assert_eq!(page.matches("<tr class=").count(), 13, "a row per node");
    assert!(page.contains("<svg id=\"graph\""), "graph view");
    assert_eq!(
        page.matches("<circle data-i=").count(),
        26,
        "13 nodes in the chart and 13 in the graph view"
    );
    let json = page
        .split("<script type=\"application/json\" id=\"data\">")
        .nth(1)
        .unwrap()
        .split("</script>")
        .next()
        .unwrap();
    let nodes: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(nodes.as_array().unwrap().len(), 13);

    let Some(chrome) = chromium() else { return };
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("report.png");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1600",
    ];
    let url = format!("file://{}#phantom-selftest", html.display());
    let result = selftest(&chrome, &html, profile.path(), &common);
    assert_eq!(result["rows"], 13, "{result}");
    assert_eq!(result["sorted"], true, "the table sorts: {result}");
    assert_eq!(
        result["detail"], true,
        "clicking a node shows its detail: {result}"
    );
    for part in ["histogram", "heatmap", "jumped"] {
        assert_eq!(
            result[part], true,
            "the detail shows the {part} part: {result}"
        );
    }
    assert_eq!(
        result["errors"],
        serde_json::json!([]),
        "console errors: {result}"
    );
    let out = std::process::Command::new(&chrome)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(keep) = std::env::var_os("PHANTOM_KEEP_SCREENSHOTS") {
        std::fs::copy(&shot, std::path::Path::new(&keep).join("report.png")).unwrap();
    }
}

#[test]
fn bisect_finds_the_same_first_divergence_in_log_n_runs() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for (node, index) in [("conv2", 4), ("dwconv3", 7), ("fc", 11)] {
        let target = dir.path().join(format!("{node}.onnx"));
        perturbed_copy(&model("convnet.onnx"), node, 1.01, &target);
        let json = dir.path().join("b.json");
        let (code, out, err) = phantom(&[
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--target-model",
            target.to_str().unwrap(),
            "--bisect",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{out}{err}");
        let r = read_json(&json);
        assert_eq!(r["first_divergence"]["node"], node, "{r:#}");
        assert_eq!(r["first_divergence"]["node_index"], index);
        // One run for the outputs, then a binary search over the 13 values on the path.
        let runs = r["target_runs"].as_u64().unwrap();
        assert!(runs <= 1 + 4, "{runs} runs");
    }
    // A clean model needs one run.
    let (code, out, _) = phantom(&["onnx", model("convnet.onnx").to_str().unwrap(), "--bisect"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 target run(s)"), "{out}");
    // --slice applies to every probe: an empty slice of the drifting model sees no drift.
    let target = dir.path().join("conv2.onnx");
    let (code, out, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--bisect",
        "--slice",
        ":0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 target run(s)"), "{out}");
}
