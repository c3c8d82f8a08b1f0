//! Run-to-run determinism: a position-sensitive hash of every value's bytes per run, and for values whose hash
//! changes, how far the runs spread (elements that differ, max ULP, max abs) against the first run.

use std::collections::{HashMap, HashSet};
use std::hash::Hasher;

use serde::Serialize;

use crate::compare::metrics::ulp_distance;
use crate::model::Graph;
use crate::tensor::Tensor;

/// FNV-1a over dtype, shape and the little-endian bytes of every element, in order.
pub fn hash(t: &Tensor) -> u64 {
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 ^= *b as u64;
                self.0 = self.0.wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.write(&t.dtype().onnx_code().to_le_bytes());
    for d in t.shape() {
        h.write(&(*d as u64).to_le_bytes());
    }
    h.write(&crate::model::proto::tensor_to_proto("", t).raw_data);
    h.finish()
}

/// How one value varied across runs.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct ValueSpread {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    /// Distinct hashes seen across the runs (1 = deterministic).
    pub distinct: usize,
    /// Most elements that differed from the first run in any run.
    pub elements_differing: u64,
    pub max_ulp: u64,
    pub max_abs: f64,
}

/// Collects runs of one runner, comparing each with the first.
#[derive(Default)]
pub struct Tracker {
    pub runs: usize,
    baseline: HashMap<String, Tensor>,
    hashes: HashMap<String, HashSet<u64>>,
    spread: HashMap<String, (u64, u64, f64)>,
}

impl Tracker {
    /// Adds one run's values; only the first run's tensors are kept.
    pub fn add_run(&mut self, values: impl IntoIterator<Item = (String, Tensor)>) {
        self.runs += 1;
        for (name, t) in values {
            let h = hash(&t);
            let seen = self.hashes.entry(name.clone()).or_default();
            seen.insert(h);
            match self.baseline.get(&name) {
                None => {
                    self.baseline.insert(name, t);
                }
                Some(base) if seen.len() > 1 => {
                    let s = self.spread.entry(name).or_default();
                    if base.shape() == t.shape() {
                        let (a, b) = (base.as_f64(), t.as_f64());
                        let mut differing = 0u64;
                        for (x, y) in a.iter().zip(b.iter()) {
                            if x.to_bits() != y.to_bits() {
                                differing += 1;
                                s.1 = s.1.max(ulp_distance(t.dtype(), *x, *y));
                                s.2 = s.2.max((x - y).abs());
                            }
                        }
                        s.0 = s.0.max(differing);
                    } else {
                        s.0 = s.0.max(t.len() as u64);
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// Values whose hash changed, in topological order.
    pub fn nondeterministic(&self, graph: &Graph) -> Vec<ValueSpread> {
        let mut out = vec![];
        for n in &graph.nodes {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                let distinct = self.hashes.get(o).map_or(0, |h| h.len());
                if distinct > 1 {
                    let (e, u, a) = self.spread.get(o).copied().unwrap_or_default();
                    out.push(ValueSpread {
                        node_index: n.index,
                        node: n.name.clone(),
                        op_type: n.op_type.clone(),
                        value: o.clone(),
                        distinct,
                        elements_differing: e,
                        max_ulp: u,
                        max_abs: a,
                    });
                }
            }
        }
        out
    }

    /// How many values were hashed.
    pub fn values(&self) -> usize {
        self.hashes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, IxDyn};

    #[test]
    fn hash_sees_position_and_value() {
        let a = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.0, 2.0]).unwrap());
        let b = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![2.0, 1.0]).unwrap());
        let c = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[1, 2]), vec![1.0, 2.0]).unwrap());
        assert_ne!(hash(&a), hash(&b));
        assert_ne!(hash(&a), hash(&c));
        assert_eq!(hash(&a), hash(&a.clone()));
    }
}
