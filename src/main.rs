//! The `phantom` binary: everything happens in [`phantom::cli::run`].

#[global_allocator]
static ALLOC: phantom::heap::Allocator = phantom::heap::Allocator;

fn main() -> std::process::ExitCode {
    phantom::heap::tune();
    phantom::cli::run()
}
