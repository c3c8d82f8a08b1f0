//! The house's own claims, kept true: no hand-written Rust file over 500 lines, no function over 100 (generated
//! files, which say so on their first line, are exempt).

use std::path::{Path, PathBuf};

use crate::common::root;

const MAX_FILE_LINES: usize = 500;
const MAX_FN_LINES: usize = 100;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.ends_with("target") {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The hand-written Rust files of the workspace.
fn hand_written() -> Vec<(PathBuf, String)> {
    let mut all = vec![];
    for d in ["src", "crates", "tests", "benches"] {
        rust_files(&root().join(d), &mut all);
    }
    all.into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .filter(|(_, t)| !t.starts_with("//! Generated"))
        .collect()
}

/// Each function's name and length in lines: from its `fn` line to the `}` at the same indentation.
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let Some(at) = t.find("fn ") else { continue };
        let head = &t[..at];
        let is_item = head.split_whitespace().all(|w| {
            [
                "pub",
                "pub(crate)",
                "pub(super)",
                "async",
                "unsafe",
                "const",
                "extern",
            ]
            .contains(&w)
        });
        if !is_item || t.ends_with(';') {
            continue;
        }
        let indent = l.len() - t.len();
        let close = format!("{}}}", " ".repeat(indent));
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if let Some(end) = lines[i..].iter().position(|x| x.trim_end() == close) {
            out.push((name, end + 1));
        }
    }
    out
}

#[test]
fn no_hand_written_file_is_over_500_lines_nor_any_function_over_100() {
    let files = hand_written();
    assert!(files.len() > 200, "found {} files", files.len());
    let mut over = vec![];
    for (p, text) in &files {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            over.push(format!("{rel}: {n} lines"));
        }
        for (name, len) in functions(text) {
            if len > MAX_FN_LINES {
                over.push(format!("{rel}: fn {name} is {len} lines"));
            }
        }
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
}

#[test]
fn the_function_measure_counts_from_fn_to_its_closing_brace() {
    let text =
        "fn a() {\n    x;\n}\n\npub(crate) fn b(\n    y: u8,\n) -> u8 {\n    y\n}\n    fn c();\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 3), ("b".to_string(), 5)]
    );
}

/// The modules that run the pipeline's stages in order and hand each lane its stages' results: the stages in order
/// (`mod.rs`), the comparison's passes, and the lane's own methods, where it takes what a stage returned.
const ORCHESTRATION: &[&str] = &["mod.rs", "passes.rs", "lane.rs"];

/// What a module writes when it holds a lane mutably or owns lanes.
const HOLDS_A_LANE: &[&str] = &["&mut Lane", "&mut [Lane]", "Vec<Lane>", "mut lane: Lane"];

/// The pipeline's stages read a lane and return what they found, with what they say beside it; only the
/// orchestration holds a lane mutably.
#[test]
fn the_pipeline_s_stages_take_a_lane_to_read_and_return_what_they_found() {
    let dir = root().join("crates/pipeline/src/pipeline");
    let mut files = vec![];
    rust_files(&dir, &mut files);
    assert!(files.len() > 20, "found {} files", files.len());
    let holds = |text: &str| HOLDS_A_LANE.iter().any(|h| text.contains(h));
    let mut stages = vec![];
    for p in &files {
        let text = std::fs::read_to_string(p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let top = p.parent() == Some(dir.as_path());
        if !(top && ORCHESTRATION.contains(&name.as_str())) && holds(&text) {
            stages.push(p.strip_prefix(root()).unwrap().display().to_string());
        }
    }
    assert!(
        stages.is_empty(),
        "stages holding a lane mutably: {stages:?}"
    );
    let lane = std::fs::read_to_string(dir.join("lane.rs")).unwrap();
    assert!(holds(&lane), "the check finds the orchestration's own");
}
