//! The documentation holds together: the README stays a short guide (at most 400 lines), every chapter the book's
//! SUMMARY lists exists, every relative link in the README and the book leads to a file that exists, and the book
//! builds with mdbook (`.ci/run` installs it under `target/tools` when it is missing).

use std::path::Path;

use regex::Regex;

use crate::common::root;

/// Relative link targets in the Markdown `text` (web links and in-page anchors left out), without their anchors.
fn links(text: &str) -> Vec<String> {
    let re = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    re.captures_iter(text)
        .map(|c| c[1].to_string())
        .filter(|l| !l.starts_with("http") && !l.starts_with('#'))
        .map(|l| l.split('#').next().unwrap().to_string())
        .collect()
}

fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    links(&text)
        .into_iter()
        .filter(|l| !dir.join(l).exists())
        .map(|l| format!("{}: {l}", file.display()))
        .collect()
}

#[test]
fn readme_is_short_and_every_link_of_the_docs_resolves() {
    let readme = root().join("README.md");
    let lines = std::fs::read_to_string(&readme).unwrap().lines().count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines: move reference material into docs/book"
    );
    let book = root().join("docs/book/src");
    let summary = std::fs::read_to_string(book.join("SUMMARY.md")).unwrap();
    let chapters = links(&summary);
    assert!(chapters.len() >= 15, "{chapters:?}");
    let mut broken = broken_links(&readme);
    broken.extend(broken_links(&book.join("SUMMARY.md")));
    for c in &chapters {
        broken.extend(broken_links(&book.join(c)));
    }
    broken.extend(broken_links(&root().join("CHANGELOG.md")));
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

/// mdbook on PATH, else the one `.ci/run` installs under `target/tools`.
fn mdbook() -> Option<std::path::PathBuf> {
    let local = root().join("target/tools/bin/mdbook");
    if local.is_file() {
        return Some(local);
    }
    let on_path = std::process::Command::new("mdbook")
        .arg("--version")
        .output();
    on_path
        .is_ok_and(|o| o.status.success())
        .then(|| "mdbook".into())
}

#[test]
fn the_book_builds_with_mdbook() {
    let Some(mdbook) = mdbook() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but no mdbook: .ci/run installs it under target/tools"
        );
        eprintln!(
            "mdbook not found: the book was not built (cargo install mdbook --version =0.4.52)"
        );
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(mdbook)
        .arg("build")
        .arg(root().join("docs/book"))
        .arg("-d")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "mdbook build failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary = std::fs::read_to_string(root().join("docs/book/src/SUMMARY.md")).unwrap();
    for c in links(&summary) {
        let page = out.path().join(c.replace(".md", ".html"));
        assert!(page.is_file(), "the book has no page {}", page.display());
    }
}
