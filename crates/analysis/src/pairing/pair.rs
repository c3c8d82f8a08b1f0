//! Pairing by value: each value the target model computes is paired with the reference model's value it equals in
//! f64 within the tolerance, names being a hint and not the key. A reference value is claimed once; a second target
//! value equal to it is a duplicate. Among equal candidates the one of the same name wins, then one of the same
//! shape, then the earliest in graph order (a copy through Identity or Reshape holds the same values as its input).

use std::collections::{HashMap, HashSet};

use super::sketch::Sketch;

/// One run's values in graph order (graph inputs first), sketched.
pub type Values = Vec<(String, Sketch)>;

/// Which reference value each target value equals.
#[derive(Clone, Debug, Default)]
pub struct Pairing {
    /// Target value → the reference value it equals, each reference value claimed once.
    pub to: HashMap<String, String>,
    /// Target value → the reference value it equals when another target value claimed that one first.
    pub duplicates: HashMap<String, String>,
    /// Reference value → the target value that claimed it.
    pub from: HashMap<String, String>,
    /// Target values paired on values that say nothing of their origin (every element the same: zeros): they
    /// are renamed like the others but are no evidence that two graphs agree.
    pub weak: HashSet<String>,
    /// How far each paired target value is from its reference value, as a fraction of its scale.
    pub distance: HashMap<String, f64>,
    /// Pairs closer than this are evidence that the function is unchanged up to them, where the outputs differ
    /// ([`super::fate::divergence`]): a real change can hide inside the pairing tolerance for a while.
    pub tight: f64,
    /// The tolerance the values were paired within, as a fraction of each value's scale.
    pub tol: f64,
    /// Target values paired through their channels-first reading: held channels-last (NHWC) where the reference
    /// holds them channels-first.
    pub transposed: HashSet<String>,
}

impl Pairing {
    /// The reference value that target value `t` equals (claimed or duplicated).
    pub fn reference_of(&self, t: &str) -> Option<&str> {
        self.to
            .get(t)
            .or_else(|| self.duplicates.get(t))
            .map(String::as_str)
    }

    /// The reference value target value `t` equals, when the pairing is evidence (not [`Pairing::weak`]).
    pub fn evidence(&self, t: &str) -> Option<&str> {
        self.reference_of(t).filter(|_| !self.weak.contains(t))
    }

    /// [`Pairing::evidence`] within [`Pairing::tight`].
    pub fn close(&self, t: &str) -> Option<&str> {
        let d = self.distance.get(t).copied().unwrap_or(f64::INFINITY);
        self.evidence(t).filter(|_| d <= self.tight)
    }
}

/// Pairs every value of `target` with the value of `reference` it equals within `tol` of its scale.
pub fn pair(reference: &Values, target: &Values, (tol, tight): (f64, f64)) -> Pairing {
    let mut by_len: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, (_, s)) in reference.iter().enumerate() {
        by_len.entry(s.len).or_default().push(i);
    }
    let mut p = Pairing {
        tol,
        tight,
        ..Default::default()
    };
    let mut claimed: HashSet<usize> = HashSet::new();
    for (name, held) in target {
        let equal_to = |s: &Sketch| -> Vec<usize> {
            (by_len.get(&s.len).into_iter().flatten().copied())
                .filter(|&i| reference[i].1.agrees(s, tol))
                .collect()
        };
        // As held; else read channels-first, for a value held channels-last.
        let mut s = held;
        let mut equal = equal_to(s);
        if let (true, Some(cf)) = (equal.is_empty(), held.channels_first.as_deref()) {
            equal = equal_to(cf);
            if !equal.is_empty() {
                s = cf;
                p.transposed.insert(name.clone());
            }
        }
        // An NCHWc value read without the channels its last block pads.
        if equal.is_empty() {
            if let Some((c, e)) = (held.cropped.iter())
                .map(|c| (c, equal_to(c)))
                .find(|(_, e)| !e.is_empty())
            {
                (s, equal) = (c, e);
            }
        }
        let Some(best) = choose(&equal, reference, (name, s), &claimed) else {
            continue;
        };
        let r = reference[best].0.clone();
        if let Some(d) = reference[best].1.distance(s) {
            p.distance.insert(name.clone(), d);
        }
        if !s.informative() {
            p.weak.insert(name.clone());
        }
        if claimed.insert(best) {
            p.from.insert(r.clone(), name.clone());
            p.to.insert(name.clone(), r);
        } else {
            p.duplicates.insert(name.clone(), r);
        }
    }
    p
}

/// The candidate to pair with: same name, then unclaimed of the same shape, then unclaimed, then any.
fn choose(
    equal: &[usize],
    reference: &Values,
    (name, s): (&str, &Sketch),
    claimed: &HashSet<usize>,
) -> Option<usize> {
    let named = equal.iter().find(|&&i| reference[i].0 == name);
    let free = |i: &&usize| !claimed.contains(*i);
    named
        .filter(|i| !claimed.contains(*i))
        .or_else(|| {
            equal
                .iter()
                .filter(free)
                .find(|&&i| reference[i].1.shape == s.shape)
        })
        .or_else(|| equal.iter().find(free))
        .or(named)
        .or(equal.first())
        .copied()
}

/// Reference values no target value claimed that equal one that was: copies (Identity, Reshape...) of a paired
/// value, checked through it. Reference value → the paired value it equals.
pub fn copies(reference: &Values, p: &Pairing) -> HashMap<String, String> {
    let paired: Vec<&(String, Sketch)> = reference
        .iter()
        .filter(|(n, _)| p.from.contains_key(n))
        .collect();
    let mut out = HashMap::new();
    for (name, s) in reference.iter().filter(|(n, _)| !p.from.contains_key(n)) {
        if let Some((m, _)) = paired
            .iter()
            .find(|(_, o)| o.len == s.len && o.agrees(s, p.tol))
        {
            out.insert(name.clone(), m.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use ndarray::ArrayD;

    fn v(name: &str, data: &[f64], shape: &[usize]) -> (String, Sketch) {
        let t = Tensor::F64(ArrayD::from_shape_vec(shape.to_vec(), data.to_vec()).unwrap());
        (name.into(), Sketch::of(&t).unwrap())
    }

    #[test]
    fn a_kept_name_holding_another_value_pairs_by_value() {
        // onnxsim folds a BatchNormalization into its Conv and keeps the Conv's output name.
        let reference = vec![
            v("conv", &[1.0, 2.0], &[2]),
            v("bn", &[3.0, 5.0], &[2]),
            v("relu", &[3.0, 5.0 + 1.0], &[2]),
        ];
        let target = vec![v("conv", &[3.0, 5.0], &[2]), v("out", &[3.0, 6.0], &[2])];
        let p = pair(&reference, &target, (1e-9, 1e-9));
        assert_eq!(p.to["conv"], "bn");
        assert_eq!(p.to["out"], "relu");
        assert!(!p.from.contains_key("conv"));
    }

    #[test]
    fn same_values_prefer_the_name_then_the_shape_and_copies_are_found() {
        let reference = vec![
            v("x", &[1.0, 2.0, 3.0, 4.0], &[4]),
            v("y", &[1.0, 2.0, 3.0, 4.0], &[2, 2]),
            v("z", &[1.0, 2.0, 3.0, 4.0], &[2, 2]),
        ];
        let target = vec![
            v("a", &[1.0, 2.0, 3.0, 4.0], &[2, 2]),
            v("z", &[1.0, 2.0, 3.0, 4.0], &[2, 2]),
            v("b", &[1.0, 2.0, 3.0, 4.0], &[4]),
            v("c", &[1.0, 2.0, 3.0, 4.0], &[4]),
        ];
        let p = pair(&reference, &target, (1e-9, 1e-9));
        assert_eq!((p.to["a"].as_str(), p.to["z"].as_str()), ("y", "z"));
        assert_eq!(p.to["b"], "x");
        assert_eq!(p.duplicates["c"], "x");
        let reference = vec![v("x", &[1.0, 2.0], &[2]), v("id", &[1.0, 2.0], &[2])];
        let p = pair(&reference, &vec![v("x", &[1.0, 2.0], &[2])], (1e-9, 1e-9));
        assert_eq!(copies(&reference, &p)["id"], "x");
    }
}
