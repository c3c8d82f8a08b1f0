//! String tensors (ONNX `STRING`: class labels, categories) compare by equality, element by element: no tolerance,
//! no numeric metric. A mismatch is described by its count and its first element.

use ndarray::{ArrayD, Dimension};

use crate::tensor::Tensor;

/// How two string tensors of the same shape differ.
#[derive(Clone, Debug, PartialEq)]
pub struct StringDiff {
    pub elements: usize,
    pub differing: usize,
    /// The first differing element: its index, the reference's string and the target's.
    pub first: Option<(Vec<usize>, String, String)>,
}

impl StringDiff {
    /// What a failing comparison says, naming the two sides (`("reference", "target")`, `("A", "B")`).
    pub fn reason(&self, (a, b): (&str, &str)) -> Option<String> {
        let (at, r, t) = self.first.as_ref()?;
        Some(format!(
            "{} of {} strings differ; first at {at:?}: {a} {r:?}, {b} {t:?}",
            self.differing, self.elements
        ))
    }
}

/// Compares two string tensors of the same shape.
pub fn differ(r: &ArrayD<String>, t: &ArrayD<String>) -> StringDiff {
    let mut d = StringDiff {
        elements: r.len(),
        differing: 0,
        first: None,
    };
    for ((at, a), b) in r.indexed_iter().zip(t.iter()) {
        if a != b {
            d.differing += 1;
            if d.first.is_none() {
                d.first = Some((at.as_array_view().to_vec(), a.clone(), b.clone()));
            }
        }
    }
    d
}

/// The comparison of `r` and `t` when either holds strings: `None` when neither does, else the difference or why
/// they cannot be compared (one side strings, the other numbers).
pub fn pair(r: &Tensor, t: &Tensor) -> Option<Result<StringDiff, String>> {
    match (r.strings(), t.strings()) {
        (None, None) => None,
        (Some(a), Some(b)) => Some(Ok(differ(a, b))),
        _ => Some(Err(format!(
            "element type: reference {}, target {}",
            r.dtype(),
            t.dtype()
        ))),
    }
}

/// Whether a string comparison ([`pair`]) fails, and what it says when it does.
pub fn outcome(d: Result<StringDiff, String>, sides: (&str, &str)) -> (bool, Option<String>) {
    match d {
        Ok(d) => (d.differing > 0, d.reason(sides)),
        Err(why) => (true, Some(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr2, IxDyn};

    fn strings(rows: [[&str; 2]; 2]) -> ArrayD<String> {
        arr2(&rows)
            .mapv(str::to_string)
            .into_dimensionality::<IxDyn>()
            .unwrap()
    }

    #[test]
    fn string_tensors_compare_by_equality() {
        let r = strings([["setosa", "versicolor"], ["virginica", "setosa"]]);
        let same = differ(&r, &r.clone());
        let sides = ("reference", "target");
        assert_eq!((same.differing, same.reason(sides)), (0, None));
        let t = strings([["setosa", "versicolor"], ["versicolor", "virginica"]]);
        let d = differ(&r, &t);
        assert_eq!((d.elements, d.differing), (4, 2));
        assert_eq!(
            d.reason(sides).unwrap(),
            "2 of 4 strings differ; first at [1, 0]: reference \"virginica\", target \"versicolor\""
        );
        let numbers = Tensor::I64(ArrayD::zeros(IxDyn(&[2, 2])));
        assert!(pair(&Tensor::Str(r.clone()), &numbers).unwrap().is_err());
        assert!(pair(&numbers, &numbers).is_none());
    }
}
