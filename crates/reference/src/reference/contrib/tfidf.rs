//! ONNX's `TfIdfVectorizer` for the reference (tract has none): counts, in each row of a `[C]` or `[B, C]` input of
//! int32, int64 or strings, the n-grams of the pool (`pool_int64s` or `pool_strings`, `ngram_counts` giving where
//! each n-gram length starts) whose length lies in `[min_gram_length, max_gram_length]`, their items taken
//! `skip + 1` apart for every `skip` up to `max_skip_count` (unigrams counted once), then weighs the counts by
//! `mode` (`TF`: the counts; `IDF`: `weights`, or 1, where the count is not zero; `TFIDF`: counts times `weights`).
//! Output column `ngram_indexes[id]` holds n-gram `id` (numbered across the whole pool, lengths out of range
//! included); the output is `[max(ngram_indexes) + 1]` for a `[C]` input, else `[B, max + 1]`, in f64 (ONNX gives
//! float32; the counts are exact, and the float32 weights are widened). Written from the ONNX reference
//! implementation, which follows ONNX Runtime's kernel.

use std::collections::HashMap;

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, shaped};

/// Claimed in any domain: tract lacks TfIdfVectorizer.
pub(super) const TABLE: &[Row] = &[Row::any_domain("TfIdfVectorizer", &TfIdf)];

/// One item of an n-gram.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Item {
    Int(i64),
    Text(String),
}

struct TfIdf;

/// The node's attributes, read once per evaluation.
struct Setup {
    min: usize,
    max: usize,
    skips: usize,
    /// Output column of every n-gram (by its items) in range.
    columns: HashMap<Vec<Item>, usize>,
    width: usize,
    mode: String,
    weights: Vec<f64>,
}

fn setup(n: &Node) -> TractResult<Setup> {
    let bad = |what: String| anyhow::anyhow!("TfIdfVectorizer `{}`: {what}", n.proto.name);
    let pool: Vec<Item> = match n.proto.attribute.iter().find(|a| a.name == "pool_strings") {
        Some(a) => (a.strings.iter())
            .map(|s| Item::Text(String::from_utf8_lossy(s).into_owned()))
            .collect(),
        None => n.ints("pool_int64s").into_iter().map(Item::Int).collect(),
    };
    let indexes = n.ints("ngram_indexes");
    let width = indexes.iter().copied().max().map_or(0, |m| m + 1);
    let width = usize::try_from(width).map_err(|_| bad("negative ngram_indexes".into()))?;
    let counts = n.ints("ngram_counts");
    let (min, max) = (n.req_int("min_gram_length")?, n.req_int("max_gram_length")?);
    anyhow::ensure!(
        1 <= min && min <= max,
        bad(format!("gram lengths {min}..={max}"))
    );
    let skips = n.req_int("max_skip_count")?;
    anyhow::ensure!(skips >= 0, bad(format!("max_skip_count {skips}")));
    let (min, max, skips) = (min as usize, max as usize, skips as usize);
    let mut columns = HashMap::new();
    let mut id = 0;
    for (k, &start) in counts.iter().enumerate() {
        let size = k + 1;
        let end = counts.get(k + 1).map_or(pool.len() as i64, |&e| e);
        anyhow::ensure!(
            0 <= start && start <= end && end as usize <= pool.len(),
            bad(format!(
                "ngram_counts {counts:?} do not fit a pool of {}",
                pool.len()
            ))
        );
        for gram in pool[start as usize..end as usize].chunks_exact(size) {
            if (min..=max).contains(&size) {
                let column = (indexes.get(id).copied())
                    .and_then(|c| usize::try_from(c).ok())
                    .ok_or_else(|| bad(format!("n-gram {id} has no ngram_indexes entry")))?;
                columns.insert(gram.to_vec(), column);
            }
            id += 1;
        }
    }
    let weights = n.floats("weights");
    anyhow::ensure!(
        weights.is_empty() || weights.len() >= width,
        bad(format!("{} weights for {width} columns", weights.len()))
    );
    let mode = super::util::string(n, "mode", "");
    anyhow::ensure!(
        matches!(mode.as_str(), "TF" | "IDF" | "TFIDF"),
        bad(format!("unknown mode {mode:?}"))
    );
    Ok(Setup {
        min,
        max,
        skips,
        columns,
        width,
        mode,
        weights,
    })
}

impl Setup {
    /// The weighed counts of one row.
    fn row(&self, row: &[Item]) -> Vec<f64> {
        let mut counts = vec![0u64; self.width];
        let mut start_size = self.min;
        for skip in 1..=self.skips + 1 {
            for start in 0..row.len() {
                if start + skip * (start_size - 1) >= row.len() {
                    break;
                }
                for size in start_size..=self.max {
                    let last = start + skip * (size - 1);
                    if last >= row.len() {
                        break;
                    }
                    let gram: Vec<Item> =
                        (0..size).map(|k| row[start + skip * k].clone()).collect();
                    if let Some(&c) = self.columns.get(&gram) {
                        counts[c] += 1;
                    }
                }
            }
            // Unigrams are counted once: no skip changes them.
            if start_size == 1 {
                start_size = 2;
                if start_size > self.max {
                    break;
                }
            }
        }
        let weight = |i: usize| self.weights.get(i).copied().unwrap_or(1.0);
        (counts.iter().enumerate())
            .map(|(i, &f)| match self.mode.as_str() {
                "TF" => f as f64,
                "IDF" if f > 0 => weight(i),
                "IDF" => 0.0,
                _ => weight(i) * f as f64,
            })
            .collect()
    }
}

/// The rows of the input: its items, and whether it is batched (`[B, C]`).
fn rows(n: &Node, x: &Tensor) -> TractResult<(Vec<Vec<Item>>, bool)> {
    let items: Vec<Item> = match x.datum_type() {
        dt if dt == String::datum_type() => (x.to_plain_array_view::<String>()?.iter())
            .map(|s| Item::Text(s.clone()))
            .collect(),
        _ => (super::util::values::<i64>(x)?.into_iter())
            .map(Item::Int)
            .collect(),
    };
    Ok(match x.shape() {
        [] | [_] => (vec![items], false),
        &[b, c] => (
            (0..b).map(|r| items[r * c..(r + 1) * c].to_vec()).collect(),
            true,
        ),
        s => anyhow::bail!(
            "TfIdfVectorizer `{}` takes a [C] or [B, C] input, got {s:?}",
            n.proto.name
        ),
    })
}

impl Kernel for TfIdf {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let shape = &fact(n, ins, 0)?.1;
        let width = setup(n)?.width;
        let out = match shape.as_slice() {
            [b, _] => vec![*b, width],
            _ => vec![width],
        };
        Ok(vec![(f64::datum_type(), out)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let s = setup(n)?;
        let (rows, batched) = rows(n, opt(n, ins, 0)?)?;
        let data: Vec<f64> = rows.iter().flat_map(|r| s.row(r)).collect();
        let shape = match batched {
            true => vec![rows.len(), s.width],
            false => vec![s.width],
        };
        Ok(vec![shaped(&shape, data)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 7,
            ints: v.to_vec(),
            ..Default::default()
        }
    }

    fn int(name: &str, i: i64) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 2,
            i,
            ..Default::default()
        }
    }

    /// The ONNX suite's `tfidfvectorizer_tf_*` node.
    fn node(min: i64, skips: i64) -> Node {
        Node::new(&NodeProto {
            op_type: "phantom.TfIdfVectorizer".into(),
            name: "t".into(),
            input: vec!["x".into()],
            output: vec!["y".into()],
            attribute: vec![
                int("min_gram_length", min),
                int("max_gram_length", 2),
                int("max_skip_count", skips),
                ints("ngram_counts", &[0, 4]),
                ints("ngram_indexes", &[0, 1, 2, 3, 4, 5, 6]),
                ints("pool_int64s", &[2, 3, 5, 4, 5, 6, 7, 8, 6, 7]),
                AttributeProto {
                    name: "mode".into(),
                    r#type: 3,
                    s: b"TF".to_vec(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
    }

    fn run(n: &Node, x: Tensor) -> Vec<f64> {
        let out = TfIdf.eval(n, &[Some(&x)]).unwrap();
        super::super::util::values::<f64>(&out[0]).unwrap()
    }

    #[test]
    fn counts_follow_the_suite() {
        let x = tensor1(&[1i64, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8]);
        assert_eq!(run(&node(2, 0), x.clone()), [0., 0., 0., 0., 1., 1., 1.]);
        assert_eq!(run(&node(2, 5), x.clone()), [0., 0., 0., 0., 1., 3., 1.]);
        assert_eq!(run(&node(1, 5), x), [0., 3., 1., 0., 1., 3., 1.]);
    }

    #[test]
    fn batches_count_row_by_row() {
        let x = tensor1(&[1i64, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8])
            .into_shape(&[2, 6])
            .unwrap();
        let got = run(&node(1, 5), x);
        assert_eq!(got[..7], [0., 3., 0., 0., 0., 0., 0.]);
        assert_eq!(got[7..], [0., 0., 1., 0., 1., 1., 1.]);
    }
}
