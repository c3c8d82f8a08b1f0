//! The renderers of phantom's report, one per format (terminal, JSON, JUnit, Markdown, HTML, DOT, Model Explorer
//! overlays), and the one emitter that writes the files a command asks for. They read the report model of
//! `phantom-analysis` and nothing above it. The module keeps the path the rest of phantom uses
//! (`phantom::report`).

// The layers below, under the names the code uses.
pub(crate) use phantom_analysis::analysis;
pub(crate) use phantom_core::{error, fsutil, units};
pub(crate) use phantom_model as model;

pub mod report;
