//! The recipe on a real one-node Slurm (Debian's slurm-wlm and munge, brought up and torn down by
//! `scripts/cluster/slurm-local.sh`): plan → boundary → array → merge, with one array task cancelled before it runs.
//! The merge, which runs after any end of the array, names the missing segment and the command that reruns it; the
//! task is rerun as a job of its own, the merge run again, and the merged verdict is the direct run's. Needs root
//! and the packages (`.ci/run` installs them; under `CI=true` their absence fails the test).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{ensure_runtime, model, read_json, root};

/// A one-node Slurm for the test's life.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn up(dir: &Path) -> Option<Cluster> {
        let ready = Command::new("id").arg("-u").output().ok()?.stdout == b"0\n"
            && Path::new("/usr/sbin/slurmctld").exists()
            && Path::new("/usr/sbin/munged").exists();
        if !ready {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but no Slurm: .ci/run installs Debian's slurm-wlm and munge and runs as root"
            );
            eprintln!("skipped: needs root and Debian's slurm-wlm and munge");
            return None;
        }
        let out = Command::new("bash")
            .arg(root().join("scripts/cluster/slurm-local.sh"))
            .args(["up", dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Cluster {
            dir: dir.to_path_buf(),
        })
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// Runs a Slurm client command (or the recipe) in `cwd` with this cluster's configuration and phantom on PATH.
    fn run(&self, cwd: &Path, program: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
        let bin = Path::new(env!("CARGO_BIN_EXE_phantom")).parent().unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(cwd)
            .env("SLURM_CONF", self.conf())
            .env("PATH", path)
            .env("NO_COLOR", "1");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{program} {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Waits until the queue is empty (every job ended), at most three minutes.
    fn drain(&self, cwd: &Path) {
        let start = Instant::now();
        while !self.run(cwd, "squeue", &["-h"], &[]).trim().is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "jobs still queued after 3 min; logs in {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("scripts/cluster/slurm-local.sh"))
            .args(["down", self.dir.to_str().unwrap()])
            .status();
    }
}

/// The number after `label` in the recipe's "submitted: boundary 2, segments 3 …" line.
fn job_id(said: &str, label: &str) -> String {
    let line =
        (said.lines().find(|l| l.starts_with("submitted:"))).unwrap_or_else(|| panic!("{said}"));
    let at = line
        .find(&format!("{label} "))
        .unwrap_or_else(|| panic!("{line}"))
        + label.len()
        + 1;
    line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

#[test]
fn segments_run_on_a_real_slurm_and_a_missing_one_is_named_then_rerun() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let Some(cluster) = Cluster::up(&dir.path().join("slurm")) else {
        return;
    };
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let (m, plan) = (model("convnet.onnx"), work.join("the plan"));
    let recipe = root().join("scripts/cluster/slurm.sh");
    let said = cluster.run(
        &work,
        "bash",
        &[recipe.to_str().unwrap()],
        &[
            ("MODEL", &m),
            ("PLAN", &plan),
            ("K", Path::new("2")),
            ("TIME", Path::new("10:00")),
            ("CPUS", Path::new("1")),
        ],
    );
    // Task 1 waits on the boundary job: cancelled now, it never runs.
    let (segments, merge) = (job_id(&said, "segments"), job_id(&said, "merge"));
    cluster.run(&work, "scancel", &[&format!("{segments}_1")], &[]);
    cluster.drain(&work);
    let merged = std::fs::read_to_string(work.join(format!("slurm-{merge}.out"))).unwrap();
    assert!(
        merged.contains("1 of 2 segment report(s) missing: segment(s) 1")
            && merged.contains("phantom segment"),
        "{merged}"
    );
    // Rerun as the merge says, then merge again.
    let plan_s = plan.to_str().unwrap();
    let rerun = format!("phantom segment '{plan_s}' --index 1 --quiet");
    let task = cluster.run(
        &work,
        "sbatch",
        &["--parsable", "--mem=512M", "--wrap", &rerun],
        &[],
    );
    let merge_again = format!("phantom merge '{plan_s}' --json '{plan_s}/report.json'");
    let dep = format!("--dependency=afterok:{}", task.trim());
    cluster.run(
        &work,
        "sbatch",
        &["--parsable", "--mem=256M", &dep, "--wrap", &merge_again],
        &[],
    );
    cluster.drain(&work);
    let merged = read_json(&plan.join("report.json"));
    let direct_json = work.join("direct.json");
    let direct = crate::common::phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--json",
        direct_json.to_str().unwrap(),
    ]);
    assert_eq!(direct.0, 0, "{}", direct.1);
    let direct = read_json(&direct_json);
    assert_eq!(merged["verdict"]["status"], "clean", "{merged}");
    assert_eq!(merged["verdict"]["status"], direct["verdict"]["status"]);
    assert_eq!(
        merged["coverage"]["compared"],
        direct["coverage"]["compared"]
    );
}
