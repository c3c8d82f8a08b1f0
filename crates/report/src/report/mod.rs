//! The report: one serde model ([`model`]), one renderer per file ([`terminal`], [`json`], [`junit`],
//! [`markdown`], [`dot`], [`html`]).

pub mod culprits;
pub mod dot;
pub mod emit;
pub mod explorer;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub use phantom_analysis::report::model;
pub mod multi;
pub mod terminal;

pub use model::Report;
