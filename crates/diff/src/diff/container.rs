//! Container prefixes: a tensor read from a file is named by the file (a one-tensor `.npz` by its stem) or by
//! `file/key` (a folder of several files), which is how phantom keeps names unique. When one side is a folder of
//! per-layer files and the other a single dump, those prefixes are all that keeps names apart: each side may instead
//! be named by the tensors' own keys (or their file names), where those are unique on it. The naming that pairs the
//! most tensors is kept, only when it pairs more than the full names, and the report says so.

use std::collections::{BTreeMap, HashSet};

use super::Named;

/// A side's tensors by their short names (the key inside the file, else the last path component), when those
/// differ from the full names and are unique; `None` otherwise.
fn short(tensors: &BTreeMap<String, Named>) -> Option<BTreeMap<String, Named>> {
    let mut out = BTreeMap::new();
    for (name, named) in tensors {
        let key = named
            .parts
            .first()
            .map(|(_, _, item)| item.key.as_str())
            .unwrap_or("");
        let s = match key.is_empty() {
            true => name.rsplit('/').next().unwrap_or(name).to_string(),
            false => key.to_string(),
        };
        if out.insert(s, named.clone()).is_some() {
            return None;
        }
    }
    (out.keys().ne(tensors.keys())).then_some(out)
}

fn pairs(a: &BTreeMap<String, Named>, b: &BTreeMap<String, Named>) -> usize {
    let names: HashSet<&String> = a.keys().collect();
    b.keys().filter(|n| names.contains(n)).count()
}

/// Renames the sides where short names pair more tensors; returns a sentence per side renamed. Sides with
/// `--rename` rules keep their names (the rules say how to name them).
pub fn reconcile(
    a: &mut BTreeMap<String, Named>,
    b: &mut BTreeMap<String, Named>,
    ruled: (bool, bool),
) -> (Option<String>, Option<String>) {
    let sa = (!ruled.0).then(|| short(a)).flatten();
    let sb = (!ruled.1).then(|| short(b)).flatten();
    let full = pairs(a, b);
    let options = [
        (
            sa.is_some(),
            false,
            sa.as_ref().map(|s| pairs(s, b)).unwrap_or(0),
        ),
        (
            false,
            sb.is_some(),
            sb.as_ref().map(|s| pairs(a, s)).unwrap_or(0),
        ),
        (
            sa.is_some(),
            sb.is_some(),
            match (&sa, &sb) {
                (Some(x), Some(y)) => pairs(x, y),
                _ => 0,
            },
        ),
    ];
    let Some(&(use_a, use_b, n)) = options
        .iter()
        .filter(|o| o.0 || o.1)
        .max_by_key(|o| o.2)
        .filter(|o| o.2 > full)
    else {
        return (None, None);
    };
    let said = |side: &str| {
        format!(
            "{side}'s tensors are named by their keys inside their files, without the file prefix: that pairs {n} \
             (the full names pair {full})"
        )
    };
    let mut notes = (None, None);
    if use_a {
        *a = sa.expect("checked");
        notes.0 = Some(said("A"));
    }
    if use_b {
        *b = sb.expect("checked");
        notes.1 = Some(said("B"));
    }
    notes
}
