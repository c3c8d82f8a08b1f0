//! The `phantom` binary: everything happens in [`phantom::cli::run`].

fn main() -> std::process::ExitCode {
    phantom::heap::tune();
    phantom::cli::run()
}
