//! Engines below, targets above (issue 32 item 5): no library module imports one above it. The allowed order is
//! written once, here, bottom first; `report::model` (the report's schema) sits below the analyses that fill it,
//! the renderers above them. Imports that still run up are listed in `KNOWN`: the list may only shrink (a new
//! arrow fails the test, and so does a listed one that is gone, so the list stays true).

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::root;

/// Layers, bottom first: a module may import its own layer and those below.
const LAYERS: &[&[&str]] = &[
    &["error", "fsutil", "tensor", "spill", "watchdog"],
    &["model"],
    &["precision"],
    &["runner"],
    &["compare", "report::model"],
    &["analysis"],
    &["target", "bounded"],
    &["report"],
    &["pipeline"],
    &[
        "golden", "scan", "profile", "reduce", "bisect", "replay", "segment", "diff",
    ],
    &["cli"],
];

/// Arrows that still run up (file, the module it imports), to remove.
const KNOWN: &[(&str, &str)] = &[
    ("analysis/agreement.rs", "report"),
    ("analysis/anomaly.rs", "report"),
    ("analysis/causes/mod.rs", "report"),
    ("model/image.rs", "report"),
    ("model/inline.rs", "runner"),
    ("pipeline/mod.rs", "bisect"),
    ("precision/target.rs", "runner"),
    ("report/explorer.rs", "profile"),
    ("report/explorer.rs", "scan"),
    ("report/model.rs", "target"),
    ("runner/ort/chunks.rs", "reduce"),
    ("runner/ort/chunks.rs", "target"),
];
fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The layer a `crate::…` path names: `report::model` is the schema, any other `report::` path a renderer.
fn named(path: &str) -> Option<(String, usize)> {
    let mut parts = path.split("::");
    let top = parts.next()?;
    let full = match (top, parts.next()) {
        ("report", Some("model")) => "report::model".to_string(),
        _ => top.to_string(),
    };
    Some((full.clone(), layer(&full)?))
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (file, imported module) for every import that runs up, outside `#[cfg(test)]` code.
fn arrows_up() -> BTreeSet<(String, String)> {
    let src = root().join("src");
    let mut all = vec![];
    files(&src, &mut all);
    let mut up = BTreeSet::new();
    for p in all {
        let rel = p
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let own = match (top.as_str(), rel.as_str()) {
            ("report", "report/model.rs") => "report::model".to_string(),
            _ => top.clone(),
        };
        let Some(mine) = layer(&own) else { continue };
        let text = std::fs::read_to_string(&p).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, _) in code.match_indices("crate::") {
            let path: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if let Some((name, theirs)) = named(&path) {
                if theirs > mine && name != own {
                    up.insert((rel.clone(), name));
                }
            }
        }
    }
    up
}

#[test]
fn no_library_module_imports_one_above_it() {
    let up = arrows_up();
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = up.difference(&known).collect();
    let gone: Vec<_> = known.difference(&up).collect();
    assert!(
        new.is_empty(),
        "imports that run up (move the code down, or the import up): {new:?}"
    );
    assert!(gone.is_empty(), "fixed, remove them from KNOWN: {gone:?}");
    assert!(
        known.len() <= 12,
        "the list only shrinks (12 on 2026-11-26)"
    );
}
