//! The Slurm recipe (scripts/cluster/slurm.sh) driven by a stand-in `sbatch` that records each submission: every
//! job asks for the memory the plan estimates (with margin), a time limit and CPUs; the merge runs after any end of
//! the segment tasks (a failed task is then named, not waited for); a plan path with a space survives `--wrap`.
//! The recorded jobs are then run in their dependency order with the real phantom, as Slurm would.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::{ensure_runtime, model, root};

const SBATCH: &str = r#"#!/bin/bash
# Records one submission (its arguments, one per line, then a separator) and answers a job id.
n=$(($(cat "$LOG.count" 2>/dev/null || echo 0) + 1))
echo "$n" > "$LOG.count"
printf '%s\n' "$@" >> "$LOG"
echo "--" >> "$LOG"
echo "$((100 + n))"
"#;

/// Each submission's arguments.
fn submissions(log: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(log).unwrap();
    text.split("--\n")
        .filter(|s| !s.is_empty())
        .map(|s| s.lines().map(String::from).collect())
        .collect()
}

/// The value of option `key` in a submission: `--key=value`, or `--key value` for a key without `=`.
fn arg<'a>(job: &'a [String], key: &str) -> &'a str {
    let found = match key.ends_with('=') {
        true => job.iter().find_map(|a| a.strip_prefix(key)),
        false => {
            (job.iter().position(|a| a == key)).and_then(|at| job.get(at + 1).map(String::as_str))
        }
    };
    found.unwrap_or_else(|| panic!("no {key} in {job:?}"))
}

#[test]
fn slurm_recipe_sizes_jobs_from_the_plan_and_merges_after_any_end() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, SBATCH).unwrap();
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_phantom"), bin.join("phantom")).unwrap();
    let plan = dir.path().join("my plan");
    let log = dir.path().join("sbatch.log");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .arg(root().join("scripts/cluster/slurm.sh"))
        .env("MODEL", model("convnet.onnx"))
        .env("PLAN", &plan)
        .env("K", "2")
        .env("LOG", &log)
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let jobs = submissions(&log);
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let plan_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan.join("plan.json")).unwrap()).unwrap();
    let peak = (plan_json["segments"].as_array().unwrap().iter())
        .map(|s| s["estimate"]["job_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    let mem = format!("{}M", (2 * peak + (256 << 20)) >> 20);
    for job in &jobs {
        assert_eq!(arg(job, "--mem="), mem, "{job:?}");
        assert!(!arg(job, "--time=").is_empty() && !arg(job, "--cpus-per-task=").is_empty());
    }
    let (boundary, segments, merge) = (&jobs[0], &jobs[1], &jobs[2]);
    assert_eq!(arg(segments, "--array="), "0-1");
    assert_eq!(arg(segments, "--dependency="), "afterok:101");
    assert_eq!(arg(merge, "--dependency="), "afterany:102");
    // As Slurm runs them: the boundary, every array task, then the merge, each `--wrap` through a shell.
    let run = |job: &[String], task: Option<usize>| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(arg(job, "--wrap"))
            .env("PATH", &path)
            .env("NO_COLOR", "1");
        if let Some(t) = task {
            c.env("SLURM_ARRAY_TASK_ID", t.to_string());
        }
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{job:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(boundary, None);
    for t in 0..2 {
        run(segments, Some(t));
    }
    run(merge, None);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["verdict"]["status"], "clean", "{report}");
    assert!(plan.join("report.html").is_file() && plan.join("junit.xml").is_file());
}
