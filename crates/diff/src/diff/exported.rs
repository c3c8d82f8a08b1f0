//! PyTorch eager module outputs against the values of the same module through `torch.onnx.export`. A forward-hook
//! dump names tensors by module (`layer1.0.conv1`); the exporter names values by the scopes of the modules that
//! computed them (`/layer1/layer1.0/conv1/Conv_output_0`, a second call of a module scoped `relu_1`), and in eval mode
//! folds each BatchNorm into the Conv before it, so the Conv's value is the BatchNorm's output and the Conv's own
//! output exists on the eager side only. Each module is paired with the value of its scope that agrees with it (or,
//! for a module the export left no scope, a value of its parent's scope); a module no value agrees with is paired
//! with the last value of its own scope, so a real difference shows on it — unless a module that agrees claimed that
//! value, which makes it folded into that module, and the report says so.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;

use super::{Named, Side};
use crate::compare::ToleranceSpec;
use crate::tensor::Tensor;

/// The module path an exporter value name stands for (`/layer1/layer1.0/conv1/Conv_output_0` → `layer1.0.conv1`,
/// `/Flatten_output_0` → the root, empty); `None` for a name outside the exporter's scheme.
pub fn module_of(name: &str) -> Option<String> {
    static OP: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let op =
        OP.get_or_init(|| Regex::new(r"^[A-Za-z][A-Za-z0-9]*(_\d+)?_output_\d+$").expect("regex"));
    let mut scopes: Vec<&str> = name.strip_prefix('/')?.split('/').collect();
    if !op.is_match(scopes.pop()?) {
        return None;
    }
    Some(scopes.into_iter().fold(String::new(), |path, s| {
        match path.is_empty() || s.starts_with(&format!("{path}.")) {
            true => s.to_string(),
            false => format!("{path}.{s}"),
        }
    }))
}

/// Whether scope path `p` lies inside module `m` (a repeated call `relu_1` is module `relu`).
fn inside(p: &str, m: &str) -> bool {
    let call = |p: &str| -> String {
        let (head, last) = p.rsplit_once('.').unwrap_or(("", p));
        let base = last
            .rsplit_once('_')
            .filter(|(_, n)| n.parse::<u32>().is_ok())
            .map_or(last, |(b, _)| b);
        match head.is_empty() {
            true => base.to_string(),
            false => format!("{head}.{base}"),
        }
    };
    m.is_empty() || p == m || call(p) == m || p.starts_with(&format!("{m}."))
}

/// How the exported side was renamed: the module each value pairs with, and the sentence for the report.
pub struct Paired {
    /// Module name → the exported value it pairs with.
    pub modules: BTreeMap<String, String>,
    /// Modules folded into another at export (module, the module whose value it is).
    pub folded: Vec<(String, String)>,
}

/// How two tensors of one shape differ: whether every element is within the diff's tolerance, and the relative RMS
/// difference; `None` for different shapes.
fn differ(a: &Tensor, b: &Tensor, tol: &ToleranceSpec) -> Option<(bool, f64)> {
    if a.shape() != b.shape() {
        return None;
    }
    if let Some(d) = crate::compare::strings::pair(a, b) {
        let equal = d.is_ok_and(|d| d.differing == 0);
        return Some((equal, if equal { 0.0 } else { 1.0 }));
    }
    let rule = tol.resolve(lower(a, b), None);
    let c = crate::compare::compare(&a.to_f64_array(), b, rule.tolerance, rule.operands);
    let rel = c.metrics.rmse / c.metrics.scale.max(f64::MIN_POSITIVE);
    Some((c.metrics.failed == 0, rel))
}

/// The coarser float type of the two (the one whose tolerance applies).
fn lower(a: &Tensor, b: &Tensor) -> crate::tensor::DType {
    match a.dtype().size() < b.dtype().size() && a.dtype().is_float() {
        true => a.dtype(),
        false => b.dtype(),
    }
}

fn read(n: &Named) -> Option<Tensor> {
    let [(_, _, item)] = n.parts.as_slice() else {
        return None;
    };
    item.load.read().ok()
}

/// The exported values of module `m`'s scope, else (a module the export left no scope) of its parent's, in the
/// exporter's order.
fn candidates<'v>(m: &str, scopes: &'v [(String, String)]) -> (Vec<&'v String>, bool) {
    let own: Vec<&String> = (scopes.iter())
        .filter(|(_, p)| inside(p, m))
        .map(|(v, _)| v)
        .collect();
    if !own.is_empty() {
        return (own, true);
    }
    let parent = m.rsplit_once('.').map_or("", |(p, _)| p);
    let up = (scopes.iter())
        .filter(|(_, p)| inside(p, parent))
        .map(|(v, _)| v);
    (up.collect(), false)
}

/// Pairs eager modules with exported values, or `None` when the sides are not in these schemes. `order` gives the
/// exported values' order (the dump's), else their names' order.
pub fn pair(
    eager: &BTreeMap<String, Named>,
    exported: &BTreeMap<String, Named>,
    (order, tol): (&HashMap<String, usize>, &ToleranceSpec),
) -> Option<Paired> {
    // A value outside the scheme (a graph output the exporter names `output`) belongs to the root scope.
    let named = exported.keys().filter(|v| module_of(v).is_some()).count();
    let schemed = named > 0 && named * 2 >= exported.len();
    let mut scopes: Vec<(String, String)> = (exported.keys())
        .map(|v| (v.clone(), module_of(v).unwrap_or_default()))
        .collect();
    let modules: Vec<&String> = eager.keys().filter(|m| !m.starts_with('/')).collect();
    let known = |m: &str| {
        (scopes.iter()).any(|(_, p)| !m.is_empty() && (p == m || p.starts_with(&format!("{m}."))))
    };
    if !schemed || !modules.iter().any(|m| known(m)) {
        return None;
    }
    scopes.sort_by_key(|(v, _)| order.get(v).copied().unwrap_or(usize::MAX));
    let mut cache: HashMap<&String, Option<Tensor>> = HashMap::new();
    let (mut agreed, mut own) = (BTreeMap::new(), BTreeMap::new());
    for m in modules {
        let Some(t) = read(&eager[m]) else { continue };
        let (cands, scoped) = candidates(m, &scopes);
        let fits: Vec<((bool, f64), &String)> = (cands.iter())
            .filter_map(|v| {
                let e = cache.entry(v).or_insert_with(|| read(&exported[*v]));
                Some((differ(&t, e.as_ref()?, tol)?, *v))
            })
            .collect();
        let agreeing = fits.iter().filter(|((ok, _), _)| *ok);
        match agreeing.min_by(|a, b| a.0 .1.total_cmp(&b.0 .1)) {
            Some((_, v)) => {
                agreed.insert(m.clone(), (*v).clone());
            }
            // No value agrees: the module's own last value, where it has a scope of its own; else the one value of
            // its shape in its parent's scope (a graph output the exporter names `output`).
            None if scoped => {
                let last = cands.last().map(|v| (*v).clone()).unwrap_or_default();
                own.insert(m.clone(), last);
            }
            None => {
                if let [(_, v)] = fits.as_slice() {
                    own.insert(m.clone(), (*v).clone());
                }
            }
        }
    }
    let mut folded = vec![];
    let agreeing = agreed.clone();
    for (m, v) in own {
        match agreeing.iter().find(|(_, w)| **w == v) {
            Some((into, _)) => folded.push((m, into.clone())),
            None => {
                agreed.insert(m, v);
            }
        }
    }
    Some(Paired {
        modules: agreed,
        folded,
    })
}

/// Renames the exported side (`b` when it is the exporter's, else `a`) by module where the sides are a PyTorch
/// eager dump and its export; returns which side was renamed and the sentence for its report.
pub fn reconcile(
    a: &mut Side,
    b: &mut Side,
    order: (&HashMap<String, usize>, &HashMap<String, usize>),
    tol: &ToleranceSpec,
) -> Option<(bool, String)> {
    let (on_b, p) = match pair(&a.tensors, &b.tensors, (order.1, tol)) {
        Some(p) => (true, p),
        None => (false, pair(&b.tensors, &a.tensors, (order.0, tol))?),
    };
    let side = if on_b { b } else { a };
    let (ord, renamed) = (if on_b { order.1 } else { order.0 }, p.modules.len());
    let mut tensors = BTreeMap::new();
    let mut rank = HashMap::new();
    for (m, v) in &p.modules {
        if let Some(n) = side.tensors.get(v) {
            tensors.insert(m.clone(), n.clone());
            rank.insert(m.clone(), ord.get(v).copied().unwrap_or(usize::MAX));
        }
    }
    let used: Vec<&String> = p.modules.values().collect();
    for (v, n) in &side.tensors {
        if !used.contains(&v) && !tensors.contains_key(v) {
            tensors.insert(v.clone(), n.clone());
        }
    }
    side.tensors = tensors;
    side.rank = Some(rank);
    let folded = match p.folded.is_empty() {
        true => String::new(),
        false => format!(
            "; folded at export (their values are the next module's output, e.g. a BatchNorm folded into its Conv): {}",
            p.folded.iter().map(|(m, into)| format!("`{m}` into `{into}`")).collect::<Vec<_>>().join(", ")
        ),
    };
    Some((
        on_b,
        format!(
            "values named by the PyTorch module each pairs with (torch.onnx.export's scopes, checked on the values): \
             {renamed} module(s){folded}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_scopes_name_their_modules() {
        assert_eq!(
            module_of("/layer1/layer1.0/conv1/Conv_output_0").as_deref(),
            Some("layer1.0.conv1")
        );
        assert_eq!(module_of("/conv1/Conv_output_0").as_deref(), Some("conv1"));
        assert_eq!(module_of("/Flatten_output_0").as_deref(), Some(""));
        assert_eq!(
            module_of("/layer1/layer1.0/relu_1/Relu_output_0").as_deref(),
            Some("layer1.0.relu_1")
        );
        assert_eq!(module_of("output"), None);
        assert_eq!(
            module_of("/encoder/layer.0/attention/self/MatMul_1_output_0").as_deref(),
            Some("encoder.layer.0.attention.self")
        );
    }

    #[test]
    fn a_repeated_call_belongs_to_its_module() {
        assert!(inside("layer1.0.relu_1", "layer1.0.relu"));
        assert!(inside("layer1.0.relu_1", "layer1.0"));
        assert!(!inside("layer1.0.relu_1", "layer1.0.relu_"));
        assert!(!inside("layer10.conv", "layer1"));
    }
}
