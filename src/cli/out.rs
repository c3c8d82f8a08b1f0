//! Standard output belongs to the command's summary unless a file flag names `-`: then that output takes it and
//! the summary goes to standard error, so `phantom onnx m.onnx --json - | jq .verdict` reads clean JSON.

use std::sync::atomic::{AtomicBool, Ordering};

use clap::ArgMatches;

/// The file flags that may name `-` (their clap ids).
const FILE_FLAGS: &[&str] = &["json", "junit", "summary_md", "html"];

static TAKEN: AtomicBool = AtomicBool::new(false);

/// Whether a requested output writes to standard output (the summary then prints to standard error).
pub fn taken() -> bool {
    TAKEN.load(Ordering::Relaxed)
}

/// Looks at the parsed command line: at most one file flag may name `-`; when one does, it takes standard output.
pub fn claim(matches: &ArgMatches) -> anyhow::Result<()> {
    let mut on_stdout = vec![];
    let mut m = Some(matches);
    while let Some(cur) = m {
        for id in FILE_FLAGS {
            if let Ok(Some(p)) = cur.try_get_one::<std::path::PathBuf>(id) {
                if p.as_os_str() == "-" {
                    on_stdout.push(format!("--{}", id.replace('_', "-")));
                }
            }
        }
        m = cur.subcommand().map(|(_, sub)| sub);
    }
    if on_stdout.len() > 1 {
        anyhow::bail!(
            "{} name `-`: only one output can go to standard output; give the others a file name",
            on_stdout.join(" and ")
        );
    }
    TAKEN.store(!on_stdout.is_empty(), Ordering::Relaxed);
    Ok(())
}

/// `println!` to standard output, or to standard error when an output file flag took standard output.
macro_rules! sayln {
    ($($t:tt)*) => {
        match $crate::cli::out::taken() {
            true => eprintln!($($t)*),
            false => println!($($t)*),
        }
    };
}

/// `print!` to standard output, or to standard error when an output file flag took standard output.
macro_rules! say {
    ($($t:tt)*) => {
        match $crate::cli::out::taken() {
            true => eprint!($($t)*),
            false => print!($($t)*),
        }
    };
}

pub(crate) use {say, sayln};
