//! Command-line front end: parse arguments, resolve them into settings, run the subcommand, map the outcome to
//! an exit code (0 clean, 1 drift found, 2 error).

pub mod args;
mod args_groups;
mod args_segment;
mod args_tools;
mod determinism;
mod devices;
mod diff;
mod equiv;
mod equiv_overlays;
mod golden;
mod info;
mod onnx;
mod out;
mod precision;
mod profile;
mod reduce;
mod replay;
mod run;
mod runtimes;
mod scan;
mod segment;
pub mod settings;
mod target_flags;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

/// What a subcommand concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Diverged,
}

/// Parses `std::env::args`, runs, and returns the process exit code.
pub fn run() -> ExitCode {
    let parsed = args::Cli::command()
        .try_get_matches()
        .and_then(|m| args::Cli::from_arg_matches(&m).map(|c| (c, m)));
    let cli = match parsed {
        Ok((c, m)) => match out::claim(&m) {
            Ok(()) => c,
            Err(e) => return exit_code(Err(e)),
        },
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // A panic that escapes every engine guard still ends as exit 2 with one line, never a backtrace.
    // `serve` runs until stopped: no time limit.
    if !matches!(cli.command, args::Command::Serve(_)) {
        // `phantom … | head`: end quietly when the reader goes away, as other command-line tools do, instead of
        // a "failed printing to stdout" panic reported as an internal error.
        #[cfg(unix)]
        // SAFETY: sets the default action of one signal (process-wide) before phantom starts any thread.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
        crate::watchdog::arm(std::time::Duration::from_secs(cli.timeout));
    }
    // A crash inside an engine (a signal no guard catches) ends as exit 2 with one error naming the stage.
    crate::watchdog::catch_crashes();
    // PHANTOM_DEBUG=1 keeps Rust's own panic message and backtrace.
    let default_hook = std::panic::take_hook();
    let debug = std::env::var_os("PHANTOM_DEBUG").is_some();
    std::panic::set_hook(Box::new(move |info| {
        if debug {
            default_hook(info)
        }
    }));
    let command = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let result = std::panic::catch_unwind(|| dispatch(cli)).unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // Standard output full or gone bad (`> /dev/full`, a disk that filled up): the OS's error, not a bug.
        if let Some(os) = why.strip_prefix("failed printing to stdout: ") {
            return Err(anyhow::anyhow!(
                "cannot write to standard output: {os}\n  hint: redirect it to a file system with room, or write the report with --json PATH"
            ));
        }
        Err(anyhow::anyhow!(
            "internal error: {why}\n  hint: this is a bug in phantom or an engine it uses; please report it with the model and command"
        ))
    });
    crate::work::log(&command);
    exit_code(result)
}

/// Runs the subcommand.
fn dispatch(cli: args::Cli) -> anyhow::Result<Outcome> {
    crate::model::custom_ops::request(&cli.custom_op_library)?;
    match cli.command {
        args::Command::Onnx(a) => onnx::run(*a),
        args::Command::Precision(a) => precision::run(*a),
        args::Command::Run(a) => run::run(*a),
        args::Command::Determinism(a) => determinism::run(*a),
        args::Command::Record(a) => golden::record(*a),
        args::Command::Check(a) => golden::check(*a),
        args::Command::Replay(a) => replay::run(a),
        args::Command::Info(a) => info::run(a),
        args::Command::Scan(a) => scan::run(*a),
        args::Command::Runtimes(a) => runtimes::run(a),
        args::Command::Devices(a) => devices::run(a),
        args::Command::Diff(a) => diff::run(*a),
        args::Command::Equiv(a) => equiv::run(*a),
        args::Command::Reduce(a) => reduce::run(*a),
        args::Command::Profile(a) => profile::run(*a),
        args::Command::Serve(a) => diff::serve(a),
        args::Command::Plan(a) => segment::plan(*a),
        args::Command::Segment(a) => segment::segment(a),
        args::Command::Merge(a) => segment::merge(a),
    }
}

/// 0 clean, 1 drift found, 2 error (printed with its chain of causes).
fn exit_code(result: anyhow::Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::Diverged) => ExitCode::from(1),
        Err(e) => {
            let mut shown = e.to_string();
            eprintln!("error: {shown}");
            // A cause already quoted in the line above it (an OS error inside "cannot read PATH: …") is not
            // repeated.
            for cause in e.chain().skip(1).map(|c| c.to_string()) {
                if !shown.contains(&cause) {
                    eprintln!("  caused by: {cause}");
                }
                shown = cause;
            }
            ExitCode::from(2)
        }
    }
}
