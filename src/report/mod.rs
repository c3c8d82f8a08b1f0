//! The report: one serde model ([`model`]), one renderer per file ([`terminal`], [`json`]).

pub mod json;
pub mod junit;
pub mod model;
pub mod terminal;

pub use model::Report;
