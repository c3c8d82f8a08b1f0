//! `Concat` of int64 values beyond the i32 range (a slice bound holding INT64_MAX): tract turns such a value into
//! −1 when it concatenates it, so phantom joins these itself ([`super::super::rewrite`] claims them; the `Slice`
//! that reads one reads a clamped copy). Any element type joins unchanged.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::fact;

pub(super) const TABLE: &[Row] = &[Row::new("Concat", &Join)];

struct Join;

/// The axis in `0..rank`, from ONNX's `axis` (negative counts from the end).
fn axis(n: &Node, rank: usize) -> TractResult<usize> {
    let a = n.req_int("axis")?;
    let k = if a < 0 { a + rank as i64 } else { a };
    usize::try_from(k)
        .ok()
        .filter(|&k| k < rank)
        .ok_or_else(|| anyhow::anyhow!("Concat `{}`: axis {a} outside rank {rank}", n.proto.name))
}

/// The joined type: int64 where tract hands shape values (a `Shape` read through `Unsqueeze`) as TDim.
fn joined(dt: DatumType) -> DatumType {
    match dt {
        DatumType::TDim => DatumType::I64,
        dt => dt,
    }
}

impl Kernel for Join {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, first) = fact(n, ins, 0)?;
        let ax = axis(n, first.len())?;
        let mut shape = first.clone();
        shape[ax] = ins
            .iter()
            .flatten()
            .map(|(_, s)| s.get(ax).copied().unwrap_or(0))
            .sum();
        Ok(vec![(joined(*dt), shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let first = ins.iter().flatten().next().copied();
        let dt = joined(first.map_or(DatumType::I64, |t| t.datum_type()));
        let parts = ins
            .iter()
            .flatten()
            .map(|t| Ok(t.cast_to_dt(dt)?.into_owned()))
            .collect::<TractResult<Vec<Tensor>>>()?;
        let rank = parts.first().map(|t| t.rank()).unwrap_or(0);
        Ok(vec![Tensor::stack_tensors(axis(n, rank)?, &parts)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int64_max_survives_the_join() {
        let proto = tract_onnx::pb::NodeProto {
            op_type: "phantom.Concat".into(),
            input: vec!["a".into(), "b".into()],
            output: vec!["y".into()],
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "axis".into(),
                i: 0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let n = Node::new(&proto);
        let a = tensor1(&[-1i64]);
        let b = tensor1(&[i64::MAX]);
        let y = Join.eval(&n, &[Some(&a), Some(&b)]).unwrap();
        let got: Vec<i64> = y[0]
            .to_plain_array_view::<i64>()
            .unwrap()
            .iter()
            .copied()
            .collect();
        assert_eq!(got, vec![-1, i64::MAX]);
    }
}
