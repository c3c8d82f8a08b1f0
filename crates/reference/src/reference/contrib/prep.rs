//! Classic-ML preprocessing (`ai.onnx.ml`) in f64, as ONNX Runtime's CPU kernels compute it: `Binarizer` (1 where
//! x > threshold, else 0), `Imputer` (the value `replaced_value_float`, or NaN when that is NaN, replaced per feature
//! by `imputed_value_floats`), `ArrayFeatureExtractor` (columns of the last axis by index; a 1-D input gives one
//! row) and `OneHotEncoder` over int64 or string categories (a column per category, 1 where the input equals it; an
//! unknown value is all zeros, or an error with `zeros = 0`).

use tract_onnx::prelude::tract_ndarray::{ArrayD, Axis, IxDyn};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64_like, f64s, fact, opt};

/// OneHotEncoder is claimed only with categories ([`claims_one_hot`]).
pub(super) const TABLE: &[Row] = &[
    Row::new("Binarizer", &Binarizer),
    Row::new("Imputer", &Imputer),
    Row::new("ArrayFeatureExtractor", &ArrayFeatureExtractor),
    Row::new("OneHotEncoder", &OneHotEncoder),
];

struct Binarizer;

impl Kernel for Binarizer {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        f64_like(n, ins, 0)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let t = n.float("threshold", 0.0);
        Ok(vec![f64s(n, ins, 0)?
            .mapv(|x| (x > t) as u8 as f64)
            .into_tensor()])
    }
}

struct Imputer;

impl Kernel for Imputer {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        f64_like(n, ins, 0)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let mut x = f64s(n, ins, 0)?;
        let imputed = n.floats("imputed_value_floats");
        let replaced = n.float("replaced_value_float", 0.0);
        let c = x.shape().last().copied().unwrap_or(1).max(1);
        anyhow::ensure!(
            imputed.len() == 1 || imputed.len() == c,
            "Imputer `{}` has {} imputed values for {c} features (1 or {c})",
            n.proto.name,
            imputed.len()
        );
        let hit = |v: f64| match replaced.is_nan() {
            true => v.is_nan(),
            false => v == replaced,
        };
        let data = x.as_slice_mut().expect("an owned array is contiguous");
        for (i, v) in data.iter_mut().enumerate() {
            if hit(*v) {
                *v = imputed[if imputed.len() == 1 { 0 } else { i % c }];
            }
        }
        Ok(vec![x.into_tensor()])
    }
}

struct ArrayFeatureExtractor;

/// The output shape: the input's with its last axis as long as the indices (a 1-D input gives one row).
fn extracted_shape(x: &[usize], k: usize) -> Vec<usize> {
    match x {
        [] | [_] => vec![1, k],
        [rest @ .., _] => rest.iter().copied().chain([k]).collect(),
    }
}

impl Kernel for ArrayFeatureExtractor {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let (_, idx) = fact(n, ins, 1)?;
        let k = idx.iter().product();
        Ok(vec![(*dt, extracted_shape(shape, k))])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let idx: Vec<i64> = f64s(n, ins, 1)?.iter().map(|&v| v as i64).collect();
        let last = x.shape().last().copied().unwrap_or(1);
        if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= last) {
            anyhow::bail!(
                "ArrayFeatureExtractor `{}`: index {bad} is outside the {last} features",
                n.proto.name
            );
        }
        let rows = x.len() / last.max(1);
        let picked = columns(&x.clone().into_shape(&[rows, last])?, &idx)?;
        Ok(vec![
            picked.into_shape(&extracted_shape(x.shape(), idx.len()))?
        ])
    }
}

/// Columns `idx` of the 2-D tensor `x`, in its element type.
fn columns(x: &Tensor, idx: &[i64]) -> TractResult<Tensor> {
    let cols: Vec<usize> = idx.iter().map(|&i| i as usize).collect();
    let f = x.cast_to::<f64>()?;
    let a = f
        .to_plain_array_view::<f64>()?
        .into_dimensionality::<tract_ndarray::Ix2>()?;
    let out = a.select(Axis(1), &cols).into_dyn().into_tensor();
    Ok(out.cast_to_dt(x.datum_type())?.into_owned())
}

/// Whether phantom computes this OneHotEncoder: int64 categories only.
pub fn claims_one_hot(n: &tract_onnx::pb::NodeProto) -> bool {
    n.attribute.iter().any(|a| {
        (a.name == "cats_int64s" && !a.ints.is_empty())
            || (a.name == "cats_strings" && !a.strings.is_empty())
    })
}

/// The column of each input element (`None`: not a category), from int64 or string categories.
fn one_hot_columns(n: &Node, x: &Tensor) -> TractResult<(Vec<usize>, Vec<Option<usize>>)> {
    let strings = string_categories(n);
    if x.datum_type() == String::datum_type() {
        let at = |v: &String| strings.iter().position(|c| *c == v.as_bytes());
        let cols = x.to_plain_array_view::<String>()?.iter().map(at).collect();
        return Ok((x.shape().to_vec(), cols));
    }
    let cats = n.ints("cats_int64s");
    let x = x.cast_to::<f64>()?;
    let x = x.to_plain_array_view::<f64>()?;
    let cols = x
        .iter()
        .map(|&v| cats.iter().position(|&c| c as f64 == v))
        .collect();
    Ok((x.shape().to_vec(), cols))
}

/// A OneHotEncoder's string categories (`cats_strings`), as bytes.
fn string_categories(n: &Node) -> Vec<&[u8]> {
    (n.proto.attribute.iter())
        .filter(|a| a.name == "cats_strings")
        .flat_map(|a| a.strings.iter().map(Vec::as_slice))
        .collect()
}

fn one_hot_width(n: &Node) -> usize {
    n.ints("cats_int64s").len().max(string_categories(n).len())
}

struct OneHotEncoder;

impl Kernel for OneHotEncoder {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let width = one_hot_width(n);
        anyhow::ensure!(
            width > 0,
            "OneHotEncoder `{}` has no categories",
            n.proto.name
        );
        let out = shape.iter().copied().chain([width]).collect();
        Ok(vec![(f64::datum_type(), out)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = (ins.first().copied().flatten())
            .ok_or_else(|| anyhow::anyhow!("OneHotEncoder `{}` has no input", n.proto.name))?;
        let (shape, cols) = one_hot_columns(n, x)?;
        let width = one_hot_width(n);
        let zeros = n.int("zeros", 1) != 0;
        let mut out = vec![0.0; cols.len() * width];
        for (i, c) in cols.iter().enumerate() {
            match c {
                Some(j) => out[i * width + j] = 1.0,
                None if zeros => {}
                None => anyhow::bail!(
                    "OneHotEncoder `{}`: element {i} is not one of its categories (zeros = 0)",
                    n.proto.name
                ),
            }
        }
        let shape: Vec<usize> = shape.iter().copied().chain([width]).collect();
        Ok(vec![
            ArrayD::from_shape_vec(IxDyn(&shape), out)?.into_tensor()
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn node(op: &str, attribute: Vec<AttributeProto>) -> Node {
        Node::new(&NodeProto {
            op_type: format!("phantom.{op}"),
            name: op.to_lowercase(),
            input: vec!["x".into(), "i".into()],
            output: vec!["y".into()],
            attribute,
            ..Default::default()
        })
    }

    fn floats(name: &str, v: &[f32]) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 6,
            floats: v.to_vec(),
            ..Default::default()
        }
    }

    fn float(name: &str, f: f32) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 1,
            f,
            ..Default::default()
        }
    }

    fn values(t: &Tensor) -> Vec<f64> {
        super::super::util::values::<f64>(&t.cast_to::<f64>().unwrap()).unwrap()
    }

    #[test]
    fn the_imputer_replaces_nan_per_feature_and_the_binarizer_thresholds() {
        let x = tract_ndarray::arr2(&[[f64::NAN, 1.0], [2.0, f64::NAN]])
            .into_dyn()
            .into_tensor();
        let n = node(
            "Imputer",
            vec![
                floats("imputed_value_floats", &[7.0, 9.0]),
                float("replaced_value_float", f32::NAN),
            ],
        );
        assert_eq!(
            values(&Imputer.eval(&n, &[Some(&x)]).unwrap()[0]),
            [7.0, 1.0, 2.0, 9.0]
        );
        let n = node("Binarizer", vec![float("threshold", 1.0)]);
        let x = tract_ndarray::arr1(&[0.5, 1.0, 1.5])
            .into_dyn()
            .into_tensor();
        assert_eq!(
            values(&Binarizer.eval(&n, &[Some(&x)]).unwrap()[0]),
            [0.0, 0.0, 1.0]
        );
    }

    #[test]
    fn the_feature_extractor_takes_columns_and_refuses_an_index_outside() {
        let n = node("ArrayFeatureExtractor", vec![]);
        let x = tract_ndarray::arr2(&[[1i64, 2, 3], [4, 5, 6]])
            .into_dyn()
            .into_tensor();
        let i = tract_ndarray::arr1(&[2i64, 0]).into_dyn().into_tensor();
        let y = ArrayFeatureExtractor
            .eval(&n, &[Some(&x), Some(&i)])
            .unwrap();
        assert_eq!(
            (y[0].shape(), y[0].datum_type()),
            (&[2usize, 2][..], i64::datum_type())
        );
        assert_eq!(values(&y[0]), [3.0, 1.0, 6.0, 4.0]);
        let x1 = tract_ndarray::arr1(&[1.0f64, 2.0, 3.0])
            .into_dyn()
            .into_tensor();
        let y = ArrayFeatureExtractor
            .eval(&n, &[Some(&x1), Some(&i)])
            .unwrap();
        assert_eq!(y[0].shape(), &[1, 2]);
        let bad = tract_ndarray::arr1(&[3i64]).into_dyn().into_tensor();
        let e = ArrayFeatureExtractor
            .eval(&n, &[Some(&x), Some(&bad)])
            .unwrap_err();
        assert!(
            e.to_string().contains("index 3 is outside the 3 features"),
            "{e}"
        );
    }
}
