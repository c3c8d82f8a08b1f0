//! (in progress)

use super::Kernel;

pub const OPS: &[&str] = &[];

pub fn kernel(_op: &str) -> Option<&'static dyn Kernel> {
    None
}
