//! ONNX's `Unique` (tract has none): the distinct elements of X (flattened; or the distinct slices along `axis`),
//! sorted ascending (lexicographically for slices) or, with `sorted` 0, in order of first occurrence; with the
//! index of each one's first occurrence, the index in Y of every element (slice) of X, and how often each occurs.
//! Y keeps X's type exactly; floats compare as numbers (−0 equals +0, NaNs equal each other and sort last, as
//! numpy's `unique`, which ONNX's reference uses).
//!
//! Every output's length is the number of distinct values, so typing needs X's value: it is known when X is a
//! constant or a graph input the run gives (the conformance suite's cases). Where the model computes X, tract
//! cannot type the node and it is left out with that reason.

use std::cmp::Ordering;

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, int_opt, opt, values};

/// Claimed in any domain: tract lacks Unique.
pub(super) const TABLE: &[Row] = &[Row::any_domain("Unique", &Unique)];

/// The distinct slices: the first occurrence of each (in Y's order), and each input slice's index in Y.
#[derive(Debug, PartialEq)]
struct Groups {
    first: Vec<usize>,
    inverse: Vec<usize>,
    counts: Vec<usize>,
}

/// Groups `slices` by equality under `cmp`, in ascending order or (`sorted` false) by first occurrence.
fn group<T>(slices: &[Vec<T>], sorted: bool, cmp: impl Fn(&T, &T) -> Ordering) -> Groups {
    let lex = |a: &Vec<T>, b: &Vec<T>| {
        (a.iter().zip(b))
            .map(|(x, y)| cmp(x, y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by(|&a, &b| lex(&slices[a], &slices[b]));
    let mut runs: Vec<Vec<usize>> = vec![];
    for &k in &order {
        match runs.last_mut() {
            Some(run) if lex(&slices[run[0]], &slices[k]).is_eq() => run.push(k),
            _ => runs.push(vec![k]),
        }
    }
    if !sorted {
        runs.sort_by_key(|run| run[0]);
    }
    let mut inverse = vec![0; slices.len()];
    for (g, run) in runs.iter().enumerate() {
        run.iter().for_each(|&k| inverse[k] = g);
    }
    Groups {
        first: runs.iter().map(|run| run[0]).collect(),
        counts: runs.iter().map(Vec::len).collect(),
        inverse,
    }
}

/// Numbers as numpy orders them: NaNs equal one another and above every number.
fn float_cmp(a: &f64, b: &f64) -> Ordering {
    a.partial_cmp(b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// X's elements cut into the slices along `axis` (row-major within each slice).
fn slices<T: Clone>(data: &[T], shape: &[usize], axis: usize) -> Vec<Vec<T>> {
    let (len, inner) = (shape[axis], shape[axis + 1..].iter().product::<usize>());
    let outer: usize = shape[..axis].iter().product();
    (0..len)
        .map(|k| {
            (0..outer)
                .flat_map(|o| data[(o * len + k) * inner..][..inner].to_vec())
                .collect()
        })
        .collect()
}

/// The axis the node groups along (`None`: X flattened), checked against X's rank.
fn axis(n: &Node, rank: usize) -> TractResult<Option<usize>> {
    let Some(a) = int_opt(n, "axis") else {
        return Ok(None);
    };
    let r = rank as i64;
    anyhow::ensure!(
        (-r..r).contains(&a),
        "{INVALID}Unique `{}`: axis {a} is outside X's rank {rank}",
        n.proto.name
    );
    Ok(Some(a.rem_euclid(r.max(1)) as usize))
}

/// X (flattened where no axis is given) and the axis its slices lie along.
fn operand(n: &Node, x: &Tensor) -> TractResult<(Tensor, usize)> {
    match axis(n, x.rank())? {
        Some(a) => Ok((x.clone(), a)),
        None => Ok((x.clone().into_shape(&[x.len()])?, 0)),
    }
}

/// The grouping of X's slices, compared in X's own type.
fn groups(n: &Node, x: &Tensor, axis: usize) -> TractResult<Groups> {
    let sorted = n.int("sorted", 1) != 0;
    let shape = x.shape();
    let dt = x.datum_type();
    Ok(if dt.is_float() {
        group(&slices(&values::<f64>(x)?, shape, axis), sorted, float_cmp)
    } else if dt == String::datum_type() {
        let s: Vec<String> = x.to_plain_array_view::<String>()?.iter().cloned().collect();
        group(&slices(&s, shape, axis), sorted, Ord::cmp)
    } else if dt == u64::datum_type() {
        group(&slices(&values::<u64>(x)?, shape, axis), sorted, Ord::cmp)
    } else {
        group(&slices(&values::<i64>(x)?, shape, axis), sorted, Ord::cmp)
    })
}

/// The four outputs' facts for X of type `dt` and `shape` grouped as `g`.
fn out_facts(dt: DatumType, shape: &[usize], axis: usize, g: &Groups) -> Vec<Fact> {
    let mut y = shape.to_vec();
    y[axis] = g.first.len();
    let i64s = |len: usize| (i64::datum_type(), vec![len]);
    vec![
        (dt, y),
        i64s(g.first.len()),
        i64s(g.inverse.len()),
        i64s(g.counts.len()),
    ]
}

struct Unique;

impl Kernel for Unique {
    fn facts(&self, n: &Node, _ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        anyhow::bail!(
            "Unique `{}`: its output lengths are the number of distinct values of X, which the model computes \
             (X must be a constant or a graph input)",
            n.proto.name
        )
    }

    fn value_slots(&self) -> &'static [usize] {
        &[0]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let Some(x) = values.first().copied().flatten() else {
            return self.facts(n, ins);
        };
        let (dt, _) = fact(n, ins, 0)?;
        let (x, a) = operand(n, x)?;
        Ok(out_facts(*dt, x.shape(), a, &groups(n, &x, a)?))
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (x, a) = operand(n, opt(n, ins, 0)?)?;
        let g = groups(n, &x, a)?;
        let y = match g.first.is_empty() {
            true => Tensor::zero_dt(
                x.datum_type(),
                &out_facts(x.datum_type(), x.shape(), a, &g)[0].1,
            )?,
            false => {
                let picked: Vec<Tensor> = (g.first.iter())
                    .map(|&k| x.slice(a, k, k + 1))
                    .collect::<TractResult<_>>()?;
                Tensor::stack_tensors(a, &picked)?
            }
        };
        let ints = |v: &[usize]| tensor1(&v.iter().map(|&k| k as i64).collect::<Vec<_>>());
        Ok(vec![y, ints(&g.first), ints(&g.inverse), ints(&g.counts)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_and_in_order_of_appearance() {
        let x: Vec<Vec<f64>> = [2.0, 1.0, 1.0, 3.0, 4.0, 3.0].map(|v| vec![v]).into();
        let g = group(&x, true, float_cmp);
        assert_eq!(g.first, [1, 0, 3, 4]);
        assert_eq!(g.inverse, [1, 0, 0, 2, 3, 2]);
        assert_eq!(g.counts, [2, 1, 2, 1]);
        let g = group(&x, false, float_cmp);
        assert_eq!(g.first, [0, 1, 3, 4]);
        assert_eq!(g.inverse, [0, 1, 1, 2, 3, 2]);
        assert_eq!(g.counts, [1, 2, 2, 1]);
    }

    #[test]
    fn y_gathers_the_distinct_rows_in_x_type() {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "Unique".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "axis".into(),
                i: 0,
                ..Default::default()
            }],
            ..Default::default()
        });
        let x = tensor2(&[[2i32, 3], [1, 0], [2, 3]]);
        let out = Unique.eval(&n, &[Some(&x)]).unwrap();
        assert_eq!(out[0], tensor2(&[[1i32, 0], [2, 3]]));
        assert_eq!(out[2], tensor1(&[1i64, 0, 1]));
        assert_eq!(out[3], tensor1(&[1i64, 2]));
    }

    #[test]
    fn slices_along_an_axis_compare_lexicographically() {
        // Columns of [[1, 0, 0], [1, 0, 0], [2, 3, 3]]: (1, 1, 2), (0, 0, 3), (0, 0, 3).
        let data = [1i64, 0, 0, 1, 0, 0, 2, 3, 3];
        let cols = slices(&data, &[3, 3], 1);
        assert_eq!(cols[0], [1, 1, 2]);
        let g = group(&cols, true, Ord::cmp);
        assert_eq!(g.first, [1, 0]);
        assert_eq!(g.inverse, [1, 0, 0]);
        assert_eq!(g.counts, [2, 1]);
    }
}
