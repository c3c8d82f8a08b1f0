//! Integration tests: one binary, real models through real runtimes.

mod common;
mod compare;
mod errors;
mod oracle;
mod schema;
