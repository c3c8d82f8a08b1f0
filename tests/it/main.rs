//! Integration tests: one binary, real models through real runtimes.

mod common;
mod compare;
mod errors;
mod inputs;
mod oracle;
mod schema;
