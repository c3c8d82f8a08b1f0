//! EmbedLayerNormalization (`com.microsoft`, written by ORT's BERT optimizer): word + position (+ segment)
//! embeddings, layer-normalized, with the mask reduced to one length per sequence.
//!
//! As ORT's CPU kernel computes it (where ContribOperators.md says otherwise): `mask_index` counts the mask's
//! entries equal to 1 (not the position of the first 0), zeros without a mask; `embedding_sum` includes the segment
//! embedding; a segment table without segment ids adds its row 0; position ids of shape (1, S) broadcast over the
//! batch, and without them position s is used.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{check_len, f64s, f64s_opt, fact, float_type, opt, shaped, values, RowNorm};

pub(super) const TABLE: &[Row] = &[Row::new("EmbedLayerNormalization", &Embed)];

struct Embed;

/// Integer input `slot` as i64 values, or `None` where absent.
fn ints(ins: &[Option<&Tensor>], slot: usize) -> TractResult<Option<Vec<i64>>> {
    match ins.get(slot).copied().flatten() {
        Some(t) => Ok(Some(values::<i64>(t)?)),
        None => Ok(None),
    }
}

/// Row `i` of a [rows, h] table, or an error naming the table.
fn row<'a>(table: &'a [f64], h: usize, i: i64, what: &str) -> TractResult<&'a [f64]> {
    let rows = table.len() / h.max(1);
    anyhow::ensure!(
        i >= 0 && (i as usize) < rows,
        "{what} index {i} is outside the table's {rows} rows"
    );
    Ok(&table[i as usize * h..][..h])
}

impl Kernel for Embed {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let ids = fact(n, ins, 0)?;
        let w = fact(n, ins, 2)?;
        let dt = float_type(n, w)?;
        anyhow::ensure!(
            ids.1.len() == 2 && w.1.len() == 2,
            "input_ids must be (B, S) and word_embedding (V, H)"
        );
        let (b, s, h) = (ids.1[0], ids.1[1], w.1[1]);
        Ok(vec![
            (dt, vec![b, s, h]),
            (i32::datum_type(), vec![b]),
            (dt, vec![b, s, h]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let ids = ints(ins, 0)?.expect("input_ids is required");
        let shape = opt(n, ins, 0)?.shape().to_vec();
        let (b, s) = (shape[0], shape[1]);
        let segs = ints(ins, 1)?;
        let word = f64s(n, ins, 2)?;
        let pos_table = f64s(n, ins, 3)?;
        let seg_table = f64s_opt(ins, 4)?;
        let (gamma, beta) = (f64s(n, ins, 5)?, f64s(n, ins, 6)?);
        let mask = ints(ins, 7)?;
        let pos_ids = ints(ins, 8)?;
        let h = word.shape()[1];
        check_len(&gamma, h, "gamma")?;
        check_len(&beta, h, "beta")?;
        let (word, pos_table) = (
            word.as_slice().expect("standard"),
            pos_table.as_slice().expect("standard"),
        );
        let mut sum = Vec::with_capacity(b * s * h);
        for t in 0..b * s {
            let p = match &pos_ids {
                None => (t % s) as i64,
                Some(p) if p.len() == s => p[t % s],
                Some(p) => p[t],
            };
            let w = row(word, h, ids[t], "input_ids")?;
            let pe = row(pos_table, h, p, "position")?;
            let se = match &seg_table {
                Some(tab) => {
                    let i = segs.as_ref().map_or(0, |v| v[t]);
                    Some(row(tab.as_slice().expect("standard"), h, i, "segment_ids")?)
                }
                None => None,
            };
            sum.extend((0..h).map(|j| w[j] + pe[j] + se.map_or(0.0, |v| v[j])));
        }
        let norm = RowNorm {
            gamma: gamma.as_slice().expect("standard"),
            beta: Some(beta.as_slice().expect("standard")),
            epsilon: n.float("epsilon", 1e-12),
            simplified: false,
        };
        let mut out = sum.clone();
        out.chunks_mut(h.max(1)).for_each(|r| {
            norm.apply(r);
        });
        let mask_index: Vec<i32> = (0..b)
            .map(|i| {
                mask.as_ref().map_or(0, |m| {
                    m[i * s..][..s].iter().filter(|&&v| v == 1).count() as i32
                })
            })
            .collect();
        Ok(vec![
            shaped(&[b, s, h], out)?,
            tract_onnx::prelude::tract_ndarray::Array1::from(mask_index).into_tensor(),
            shaped(&[b, s, h], sum)?,
        ])
    }
}
