//! Cache dims from the `genai_config.json` onnxruntime-genai's model builder writes beside its model: the KV cache
//! inputs (`past_key_values.%d.key`/`.value`, as its `inputs.past_key_names` say) are [batch, kv heads, past length,
//! head size], the builder naming the last `kv_cache_dim`. Without it phantom would guess that dim as an image side.

use std::path::Path;

use super::dims::Chosen;
use super::{Dim, Graph};

/// ((input, axis), size) for each cache input's head-count and head-size axes that the model leaves symbolic.
pub fn cache_dims(graph: &Graph) -> Vec<((String, usize), Chosen)> {
    let Some(cfg) = graph
        .path
        .parent()
        .and_then(|d| read(&d.join("genai_config.json")))
    else {
        return vec![];
    };
    let decoder = &cfg["model"]["decoder"];
    let size = |k: &str| decoder[k].as_u64().map(|v| v as usize);
    let patterns: Vec<String> = ["past_key_names", "past_value_names"]
        .iter()
        .filter_map(|k| decoder["inputs"][k].as_str().map(String::from))
        .collect();
    let mut out = vec![];
    for info in &graph.inputs {
        let Some(dims) = info.dims.as_ref().filter(|d| d.len() == 4) else {
            continue;
        };
        if !patterns.iter().any(|p| matches(p, &info.name)) {
            continue;
        }
        for (axis, key, what) in [
            (1, "num_key_value_heads", "the KV head count"),
            (3, "head_size", "the head size"),
        ] {
            let symbolic = matches!(&dims[axis], Dim::Symbolic(_)) || dims[axis] == Dim::Fixed(-1);
            if let Some(value) = size(key).filter(|_| symbolic) {
                let from = format!("{what} in genai_config.json (`{key}`)");
                out.push(((info.name.clone(), axis), Chosen { value, from }));
            }
        }
    }
    out
}

fn read(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Whether `name` is `pattern` with its `%d` replaced by a layer number.
fn matches(pattern: &str, name: &str) -> bool {
    let Some((head, tail)) = pattern.split_once("%d") else {
        return pattern == name;
    };
    let Some(mid) = name.strip_prefix(head).and_then(|r| r.strip_suffix(tail)) else {
        return false;
    };
    !mid.is_empty() && mid.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn names_match_the_builder_s_patterns() {
        assert!(matches("past_key_values.%d.key", "past_key_values.12.key"));
        assert!(!matches(
            "past_key_values.%d.key",
            "past_key_values.12.value"
        ));
        assert!(!matches("past_key_values.%d.key", "past_key_values..key"));
    }
}
