//! How a `--target-model`'s values were paired with the model's, as the report records it.

use std::collections::BTreeMap;

use serde::Serialize;

/// How a target model's values were paired with the model's, by what they compute in f64.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Pairing {
    /// What was paired, in a sentence.
    pub summary: String,
    /// The target model's values that equal a value of the model of another name → that name (the comparison
    /// reads them under it).
    pub renamed: BTreeMap<String, String>,
    /// The model's values computed inside a fused node of the target model → that node.
    pub fused: BTreeMap<String, String>,
    /// Where the target model stops computing the model's function even in f64 (its value), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverges_at: Option<String>,
}
