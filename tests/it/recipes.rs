//! The cluster recipes in scripts/cluster/ are plain files users copy: the shell ones pass `bash -n`, the YAML ones
//! parse and have the shape their scheduler needs, and every phantom command line in them parses with phantom's
//! own command-line parser.

use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use phantom::cli::args::Cli;
use regex::Regex;
use yaml_rust2::{Yaml, YamlLoader};

use crate::common::root;

fn recipes() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("scripts/cluster"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Every `phantom plan|segment|merge …` command in `text`, shell variables (and xargs' `{}`) replaced by `1`.
fn commands(text: &str) -> Vec<Vec<String>> {
    let vars =
        Regex::new(r#"\$\{\{[^}]*\}\}|\$\(\([^)]*\)\)|"\$@"|"?\$\{?[A-Za-z_][A-Za-z_0-9]*\}?"?"#)
            .unwrap();
    let command = Regex::new(r"phantom (plan|segment|merge)\b").unwrap();
    let mut out = vec![];
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        if let Some(array) = line.find("[\"phantom\"") {
            let end = line[array..].find(']').unwrap() + array + 1;
            out.push(serde_json::from_str::<Vec<String>>(&line[array..end]).unwrap());
            continue;
        }
        let line = line.replace("{}", "1");
        let line = vars.replace_all(&line, |c: &regex::Captures| match &c[0] {
            "\"$@\"" => String::new(),
            _ => "1".to_string(),
        });
        let Some(at) = command.find(&line) else {
            continue;
        };
        let rest = &line[at.start()..];
        let rest = rest.split(['"', '#']).next().unwrap();
        out.push(rest.split_whitespace().map(String::from).collect());
    }
    out
}

#[test]
fn cluster_recipes_are_valid_and_their_commands_parse() {
    let mut seen = 0;
    for path in recipes() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        match path.extension().and_then(|e| e.to_str()) {
            Some("sh") => {
                let st = Command::new("bash").arg("-n").arg(&path).status().unwrap();
                assert!(st.success(), "{name}: bash -n fails");
            }
            Some("yaml") | Some("yml") => {
                check_yaml(&name, &YamlLoader::load_from_str(&text).unwrap()[0])
            }
            _ => panic!("{name}: a recipe is .sh, .yaml or .yml"),
        }
        let cmds = commands(&text);
        // slurm-local.sh brings up a scheduler to try the others on; it runs no phantom command.
        assert!(
            !cmds.is_empty() || name == "slurm-local.sh",
            "{name}: no phantom command"
        );
        for c in cmds {
            if let Err(e) = Cli::try_parse_from(&c) {
                panic!("{name}: `{}` does not parse: {e}", c.join(" "));
            }
            seen += 1;
        }
    }
    assert!(seen >= 12, "{seen} commands checked");
}

/// The Kubernetes Job is Indexed and runs `phantom segment`; the workflow's segment job is a matrix over indices.
fn check_yaml(name: &str, y: &Yaml) {
    if y["kind"].as_str() == Some("Job") {
        assert_eq!(
            y["spec"]["completionMode"].as_str(),
            Some("Indexed"),
            "{name}"
        );
        let cmd = &y["spec"]["template"]["spec"]["containers"][0]["command"];
        assert_eq!(cmd[1].as_str(), Some("segment"), "{name}");
        return;
    }
    let jobs = &y["jobs"];
    assert!(
        jobs["segment"]["strategy"]["matrix"]["index"]
            .as_vec()
            .is_some_and(|v| !v.is_empty()),
        "{name}"
    );
    assert_eq!(jobs["segment"]["needs"].as_str(), Some("plan"), "{name}");
    assert_eq!(jobs["merge"]["needs"].as_str(), Some("segment"), "{name}");
}
