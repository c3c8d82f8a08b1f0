//! Renderers of the several-targets report ([`crate::report::model::multi`]): terminal, HTML, JUnit, Markdown.

pub mod html;
pub mod junit;
pub mod markdown;
pub mod terminal;

pub use super::model::multi::*;
