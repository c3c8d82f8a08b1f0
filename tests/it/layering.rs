//! Engines below, targets above: no library module imports one above it. The layers are crates of the workspace
//! (`crates/core`, `model`, `precision`, `engine`, `reference`, `runner`, `analysis`, `report`, `diff`, `pipeline`,
//! `commands`, and `phantom` at the root: the command line), so the compiler refuses an import that runs up from one
//! crate to another; the tests below keep their dependencies pointing down. Inside a crate of several modules the
//! allowed order is written here, bottom first: in `phantom-analysis`, `compare` and `report::model` (the report's
//! schema) sit below the analyses that fill it; in `phantom-pipeline`, `bounded` and `equiv` below the pipeline. Modules of one layer may
//! import each other, never round in a circle.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::common::root;

/// What a crate re-exports from the crates below it, under the module names its code uses.
const BELOW: &[&str] = &[
    "error",
    "fsutil",
    "heap",
    "tensor",
    "spill",
    "units",
    "watchdog",
    "work",
    "simd",
    "dispatch_tensor",
    "widened",
    "model",
    "precision",
    "runner",
    "compare",
    "analysis",
    "pairing",
    "report",
    "report::model",
    "Error",
    "Result",
];

/// Layers of `phantom` (the root crate): the command line alone, over everything below.
const PHANTOM: &[&[&str]] = &[
    BELOW,
    &["diff", "pipeline", "targets", "bounded", "equiv"],
    COMMANDS,
    &["cli"],
];

/// The commands of `phantom-commands`, one layer: each may use the others, never round in a circle.
const COMMANDS: &[&str] = &[
    "golden", "scan", "profile", "reduce", "bisect", "replay", "segment", "advisor",
];

/// Layers of `phantom-pipeline`, bottom first.
const PIPELINE: &[&[&str]] = &[BELOW, &["targets"], &["bounded", "equiv"], &["pipeline"]];

/// Layers of `phantom-commands`, bottom first.
const COMMAND_LAYERS: &[&[&str]] = &[BELOW, &["pipeline", "targets"], COMMANDS];

/// Layers of `phantom-analysis`, bottom first.
const ANALYSIS: &[&[&str]] = &[
    &[
        "tensor",
        "spill",
        "units",
        "simd",
        "dispatch_tensor",
        "widened",
        "model",
        "precision",
        "facts",
        "spec",
        "reference",
    ],
    &["compare", "report::model", "pairing"],
    &["analysis"],
];

/// The source directories whose modules are layered, with their layers.
fn layered() -> [(std::path::PathBuf, &'static [&'static [&'static str]]); 4] {
    [
        (root().join("src"), PHANTOM),
        (root().join("crates/analysis/src"), ANALYSIS),
        (root().join("crates/pipeline/src"), PIPELINE),
        (root().join("crates/commands/src"), COMMAND_LAYERS),
    ]
}

fn layer(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
}

/// The module a `crate::…` path names: `report::model` is the schema, any other path its first segment.
fn named(path: &str) -> Option<String> {
    let mut parts = path.split("::");
    let top = parts.next().filter(|t| !t.is_empty())?;
    Some(match (top, parts.next()) {
        ("report", Some("model")) => "report::model".to_string(),
        _ => top.to_string(),
    })
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

/// Every `crate::` import outside `#[cfg(test)]` code under `src`: (file, its module, the module it names).
fn imports(src: &Path) -> Vec<(String, String, String)> {
    let mut all = vec![];
    files(src, &mut all);
    let mut out = vec![];
    for p in all {
        let rel = p
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let own = match rel.starts_with("report/model/") {
            true => "report::model".to_string(),
            false => top.clone(),
        };
        if rel == "main.rs" || rel == "lib.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, _) in code.match_indices("crate::") {
            let path: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if let Some(name) = named(&path) {
                if name != own {
                    out.push((rel.clone(), own.clone(), name));
                }
            }
        }
    }
    out
}

#[test]
fn no_library_module_imports_one_above_it() {
    for (src, layers) in layered() {
        let all = imports(&src);
        let up: BTreeSet<(String, String)> = all
            .iter()
            .filter(
                |(_, own, name)| match (layer(layers, own), layer(layers, name)) {
                    (Some(mine), Some(theirs)) => theirs > mine,
                    _ => false,
                },
            )
            .map(|(file, _, name)| (file.clone(), name.clone()))
            .collect();
        assert!(
            up.is_empty(),
            "{}: imports that run up (move the code down, or the import up): {up:?}",
            src.display()
        );
        let unplaced: BTreeSet<&String> = all
            .iter()
            .flat_map(|(_, own, name)| [own, name])
            .filter(|m| layer(layers, m).is_none())
            .collect();
        assert!(
            unplaced.is_empty(),
            "{}: modules with no layer: {unplaced:?}",
            src.display()
        );
        let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
        for m in lib.lines().filter_map(|l| l.strip_prefix("pub mod ")) {
            let m = m.trim_end_matches(';').trim_end_matches(" {");
            let m = if m == "report" { "report::model" } else { m };
            assert!(
                layer(layers, m).is_some(),
                "{}/lib.rs declares `{m}`, which has no layer",
                src.display()
            );
        }
    }
}

/// Modules of one layer may import each other, but never both ways round (directly or through others).
#[test]
fn no_circle_between_top_level_modules() {
    for (src, _) in layered() {
        let mut edges: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (_, own, name) in imports(&src) {
            edges.entry(own).or_default().insert(name);
        }
        for start in edges.keys() {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = edges[start].iter().collect();
            while let Some(m) = todo.pop() {
                assert!(m != start, "{start} imports itself back through {seen:?}");
                if seen.insert(m.clone()) {
                    todo.extend(edges.get(m).into_iter().flatten());
                }
            }
        }
    }
}

/// The workspace's crates, bottom first: each depends only on crates before it.
const CRATES: &[&str] = &[
    "core",
    "model",
    "precision",
    "engine",
    "reference",
    "runner",
    "analysis",
    "report",
    "diff",
    "pipeline",
    "commands",
];

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let dirs: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for d in &dirs {
        assert!(
            CRATES.contains(&d.as_str()),
            "crates/{d} has no place in CRATES"
        );
    }
    for (i, c) in CRATES.iter().enumerate() {
        let toml =
            std::fs::read_to_string(root().join("crates").join(c).join("Cargo.toml")).unwrap();
        for line in toml.lines() {
            let Some(dep) = line.strip_prefix("phantom-") else {
                continue;
            };
            let dep = dep.split(['.', ' ']).next().unwrap();
            let at = CRATES.iter().position(|x| *x == dep);
            assert!(
                at.is_some_and(|at| at < i),
                "crates/{c} depends on phantom-{dep}, which is not below it"
            );
        }
    }
}

/// The `phantom-*` crates `c` depends on, directly or through others, and `c` itself.
fn with_dependencies(c: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![c.to_string()];
    while let Some(c) = todo.pop() {
        if !seen.insert(c.clone()) {
            continue;
        }
        let toml =
            std::fs::read_to_string(root().join("crates").join(&c).join("Cargo.toml")).unwrap();
        let deps = toml.split("[dependencies]").nth(1).unwrap_or("");
        let deps = deps.split("\n[").next().unwrap();
        todo.extend(deps.lines().filter_map(|l| {
            let d = l.strip_prefix("phantom-")?;
            Some(d.split(['.', ' ']).next().unwrap().to_string())
        }));
    }
    seen
}

/// The analyses and the report writers read what an engine ran (its spec and facts, `phantom-engine`), never how:
/// neither they nor any crate they build on depends on ONNX Runtime, wgpu or clap, so a change to a shader, a
/// provider or a flag rebuilds neither.
#[test]
fn analysis_and_report_build_on_no_runtime_no_kernel_and_no_command_line() {
    const RUNTIMES: &[&str] = &["ort", "wgpu", "clap", "pollster", "libloading"];
    for top in ["analysis", "report"] {
        let below = with_dependencies(top);
        // Nor on the f64 kernels: a kernel's edit rebuilds no analysis and no renderer.
        for engine in ["runner", "reference"] {
            assert!(
                !below.contains(engine),
                "crates/{top} builds on phantom-{engine} (through {below:?})"
            );
        }
        for c in &below {
            let toml =
                std::fs::read_to_string(root().join("crates").join(c).join("Cargo.toml")).unwrap();
            let deps = toml.split("[dependencies]").nth(1).unwrap_or("");
            let deps = deps.split("\n[").next().unwrap();
            for l in deps.lines() {
                let name = l.split(['.', ' ', '=']).next().unwrap();
                assert!(
                    !RUNTIMES.contains(&name),
                    "crates/{c}, below crates/{top}, depends on {name}"
                );
            }
        }
    }
}

/// Every derived model is declared and finished by `model::surgery` (issue 58 item 2): outside it, no library code
/// builds a value declaration or a model of its own (a new graph's model comes from `surgery::Header`), or imports
/// model bytes it built.
#[test]
fn every_derived_model_goes_through_surgery() {
    let mut all = vec![];
    files(&root().join("src"), &mut all);
    for c in CRATES {
        files(&root().join("crates").join(c).join("src"), &mut all);
    }
    let surgery = root().join("crates/model/src/surgery.rs");
    let import = root().join("crates/model/src/import.rs");
    let mut found = vec![];
    for p in all.iter().filter(|p| **p != surgery) {
        let text = std::fs::read_to_string(p).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        if code.contains("ValueInfoProto {") {
            found.push(format!("{}: a ValueInfoProto built by hand", p.display()));
        }
        if code.contains("ModelProto {") {
            found.push(format!("{}: a ModelProto built by hand", p.display()));
        }
        if *p != import && code.contains("from_bytes(") && code.contains("import::") {
            found.push(format!(
                "{}: model bytes imported without surgery::finish",
                p.display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "use model::surgery (value_info, untyped_value, Header::model, finish, with_outputs): {found:#?}"
    );
}
