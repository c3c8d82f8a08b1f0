//! Names of the tensors of one dump, and the order of the report: a tensor is named by its path inside the dump
//! (extension dropped) and its key inside a multi-tensor file; `--rename` rules rewrite names; a `rank<N>` token
//! marks tensor-parallel shards, which are grouped under the name without it; `--order '{layer}_{stage}'` sorts
//! by the pattern's fields (numbers numerically, stages in the order given or first met), other names naturally.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use regex::Regex;

/// A `REGEX=REPLACEMENT` rule.
#[derive(Clone, Debug)]
pub struct Rename {
    pub from: Regex,
    pub to: String,
}

impl Rename {
    pub fn parse(s: &str) -> Result<Rename, String> {
        let (from, to) = s
            .split_once('=')
            .ok_or_else(|| format!("--rename `{s}`: expected REGEX=REPLACEMENT"))?;
        let from = Regex::new(from).map_err(|e| format!("--rename `{s}`: {e}"))?;
        Ok(Rename {
            from,
            to: to.to_string(),
        })
    }
}

/// The name of key `key` of the file at `rel` (path inside the dump); `multi` when the dump has several files.
pub fn name_of(rel: &str, key: &str, multi: bool) -> String {
    let stem = rel
        .strip_suffix(&format!(".{}", rel.rsplit('.').next().unwrap_or("")))
        .unwrap_or(rel)
        .trim_end_matches(".tar");
    match (key.is_empty(), multi) {
        (true, _) => stem.to_string(),
        (false, false) => key.to_string(),
        (false, true) => format!("{stem}/{key}"),
    }
}

/// `name` after the rules, in order.
pub fn renamed(name: &str, rules: &[Rename]) -> String {
    rules.iter().fold(name.to_string(), |n, r| {
        r.from.replace_all(&n, r.to.as_str()).into_owned()
    })
}

/// The shard rank a name carries (`rank3`, `rank_3`, `rank-3`) and the name without it.
pub fn shard(name: &str) -> Option<(usize, String)> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)(^|[/_.\-])(?:tp_?)?rank[_\-]?(\d+)($|[/_.\-])").expect("regex")
    });
    let c = re.captures(name)?;
    let rank = c[2].parse().ok()?;
    let whole = c.get(0)?;
    let (before, after) = (&c[1], &c[3]);
    let joiner = if before.is_empty() || after.is_empty() {
        ""
    } else {
        before
    };
    let rest = format!("{}{joiner}{}", &name[..whole.start()], &name[whole.end()..]);
    Some((
        rank,
        rest.trim_matches(|c| c == '/' || c == '_').to_string(),
    ))
}

/// Natural order: runs of digits compare as numbers.
pub fn natural(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = vec![];
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (chunks(a), chunks(b));
    for ((dx, cx), (dy, cy)) in x.iter().zip(&y) {
        let o = match (dx, dy) {
            (true, true) => cx
                .trim_start_matches('0')
                .len()
                .cmp(&cy.trim_start_matches('0').len())
                .then_with(|| cx.trim_start_matches('0').cmp(cy.trim_start_matches('0'))),
            _ => cx.cmp(cy),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

/// A `--order` pattern with the stage order.
pub struct Order {
    re: Regex,
    fields: Vec<String>,
    stages: Vec<String>,
}

impl Order {
    /// Parses `{layer}_{stage}`-style patterns; `stages` fixes the order of the `stage` field's values.
    pub fn parse(pattern: &str, stages: &[String]) -> Result<Order, String> {
        let field = Regex::new(r"\{(\w+)\}").expect("regex");
        let mut re = String::from(r"(?:^|/)");
        let mut fields = vec![];
        let mut last = 0;
        for c in field.captures_iter(pattern) {
            let m = c.get(0).expect("match");
            re.push_str(&regex::escape(&pattern[last..m.start()]));
            re.push_str(&format!("(?P<{}>.+?)", &c[1]));
            fields.push(c[1].to_string());
            last = m.end();
        }
        if fields.is_empty() {
            return Err(format!(
                "--order `{pattern}` names no field (write them as {{layer}}, {{stage}}...)"
            ));
        }
        re.push_str(&regex::escape(&pattern[last..]));
        re.push('$');
        let re = Regex::new(&re).map_err(|e| format!("--order `{pattern}`: {e}"))?;
        Ok(Order {
            re,
            fields,
            stages: stages.to_vec(),
        })
    }

    /// `names` sorted by the pattern: matching names first, by their fields; the stage order is the one given, or
    /// the order stages are first met in natural order. Returns the stage order used.
    pub fn sort(&self, names: &mut [String]) -> Vec<String> {
        names.sort_by(|a, b| natural(a, b));
        let mut stages = self.stages.clone();
        for n in names.iter() {
            if let Some(c) = self.re.captures(n) {
                if let Some(s) = c.name("stage") {
                    if !stages.iter().any(|x| x == s.as_str()) {
                        stages.push(s.as_str().to_string());
                    }
                }
            }
        }
        let key = |n: &str| -> Option<Vec<(u64, String)>> {
            let c = self.re.captures(n)?;
            Some(
                self.fields
                    .iter()
                    .map(|f| {
                        let v = c.name(f).map_or("", |m| m.as_str());
                        match (f.as_str(), v.parse::<u64>()) {
                            (_, Ok(x)) => (x, String::new()),
                            ("stage", _) => (
                                stages.iter().position(|s| s == v).unwrap_or(usize::MAX) as u64,
                                String::new(),
                            ),
                            _ => (0, v.to_string()),
                        }
                    })
                    .collect(),
            )
        };
        let keys: BTreeMap<String, Option<Vec<(u64, String)>>> =
            names.iter().map(|n| (n.clone(), key(n))).collect();
        names.sort_by(|a, b| match (&keys[a], &keys[b]) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| natural(a, b)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => natural(a, b),
        });
        stages
    }
}

/// For a side that is one directory of a `phantom onnx --dump` (its `index.json` one level up): the ONNX value name
/// of each file, by path inside that directory. Empty for any other directory.
pub fn phantom_dump_names(dir: &std::path::Path) -> std::collections::HashMap<String, String> {
    let mut names = std::collections::HashMap::new();
    let (Some(parent), Some(sub)) = (dir.parent(), dir.file_name()) else {
        return names;
    };
    let Ok(text) = std::fs::read_to_string(parent.join("index.json")) else {
        return names;
    };
    let Ok(index) = serde_json::from_str::<serde_json::Value>(&text) else {
        return names;
    };
    if index["schema"] != "phantom-dump/1" {
        return names;
    }
    let prefix = format!("{}/", sub.to_string_lossy());
    for v in index["values"].as_array().into_iter().flatten() {
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let files = std::iter::once(&v["reference"])
            .chain(v["targets"].as_array().into_iter().flatten().map(|t| &t[1]));
        for f in files.filter_map(|f| f.as_str()) {
            if let Some(rel) = f.strip_prefix(&prefix) {
                names.insert(rel.to_string(), name.to_string());
            }
        }
    }
    names
}

/// For a side that is one directory of a `phantom onnx --dump`: each ONNX value's position in the run (the dump's
/// order, topological). Empty for any other directory.
pub fn phantom_dump_order(dir: &std::path::Path) -> std::collections::HashMap<String, usize> {
    let index = dir
        .parent()
        .and_then(|p| std::fs::read_to_string(p.join("index.json")).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .filter(|i| i["schema"] == "phantom-dump/1");
    let values = index.as_ref().and_then(|i| i["values"].as_array());
    (values.into_iter().flatten())
        .filter_map(|v| v["name"].as_str())
        .enumerate()
        .map(|(i, n)| (n.to_string(), i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_sort_numerically_then_by_stage() {
        let mut names: Vec<String> = [
            "layer10_mlp",
            "layer2_attn",
            "layer2_mlp",
            "layer10_attn",
            "embed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = Order::parse("layer{layer}_{stage}", &["attn".into(), "mlp".into()]).unwrap();
        o.sort(&mut names);
        assert_eq!(
            names,
            [
                "layer2_attn",
                "layer2_mlp",
                "layer10_attn",
                "layer10_mlp",
                "embed"
            ]
        );
    }

    #[test]
    fn shard_tokens_are_found_and_removed() {
        assert_eq!(shard("rank1/layer3_mlp"), Some((1, "layer3_mlp".into())));
        assert_eq!(shard("layer3_mlp_rank0"), Some((0, "layer3_mlp".into())));
        assert_eq!(shard("layer3_rank_2_mlp"), Some((2, "layer3_mlp".into())));
        assert_eq!(shard("frankly"), None);
    }

    #[test]
    fn names_drop_the_extension_and_keep_keys() {
        assert_eq!(name_of("a/layer1_attn.pth", "", true), "a/layer1_attn");
        assert_eq!(name_of("dump.safetensors", "h.0", false), "h.0");
        assert_eq!(name_of("x.npz", "h.0", true), "x/h.0");
    }
}
