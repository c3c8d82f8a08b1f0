//! ORT's `DynamicQuantizeLSTM` (what `onnxruntime.quantization.quantize_dynamic` makes of an LSTM) on phantom's
//! f64 LSTM ([`crate::reference::rnn::dq_lstm`]), with activations requantized as ORT's CPU kernel does;
//! and ONNX's own `LSTM`, `GRU` and `RNN` on phantom's f64 kernels ([`crate::reference::rnn`]) from parsing on:
//! tract's expansion of them cannot be typed in f64 when an initial state is a graph input (a segment's boundary,
//! a streaming model's state), and computes in f32.

use tract_onnx::prelude::*;

use super::super::rnn;
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s_opt, fact, float_type, tensor};

/// The recurrent ops; ONNX's LSTM, GRU and RNN are claimed by [`claims_recurrent`].
pub(super) const TABLE: &[Row] = &[
    Row::new("DynamicQuantizeLSTM", &DqLstm),
    Row::new(
        "LSTM",
        &Recurrent {
            gates: 4,
            states: 2,
        },
    ),
    Row::new(
        "GRU",
        &Recurrent {
            gates: 3,
            states: 1,
        },
    ),
    Row::new(
        "RNN",
        &Recurrent {
            gates: 1,
            states: 1,
        },
    ),
];

struct DqLstm;

impl Kernel for DqLstm {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, x, w) = sequence(n, ins)?;
        let (seq, batch, dirs, hidden) = (x[0], x[1], w[0], w[2] / 4);
        Ok(recurrent_facts(dt, (seq, batch, dirs, hidden), false, 2))
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let inputs = (0..12)
            .map(|k| f64s_opt(ins, k))
            .collect::<TractResult<Vec<_>>>()?;
        let outs = rnn::dq_lstm(&n.proto, &inputs, &super::quant::requantized)
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok(outs.into_iter().map(tensor).collect())
    }
}

/// The element type and the shapes of X and W, both of rank 3.
fn sequence<'a>(
    n: &Node,
    ins: &[Option<&'a Fact>],
) -> TractResult<(DatumType, &'a [usize], &'a [usize])> {
    let x = fact(n, ins, 0)?;
    let w = fact(n, ins, 1)?;
    let dt = float_type(n, x)?;
    anyhow::ensure!(
        x.1.len() == 3 && w.1.len() == 3,
        "{} wants X and W of rank 3",
        n.op()
    );
    Ok((dt, &x.1, &w.1))
}

/// Y, then `states` state outputs (Y_h, and Y_c for an LSTM), from (seq, batch, directions, hidden).
fn recurrent_facts(
    dt: DatumType,
    (seq, batch, dirs, hidden): (usize, usize, usize, usize),
    batch_first: bool,
    states: usize,
) -> Vec<Fact> {
    let (y, state) = match batch_first {
        true => (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden]),
        false => (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden]),
    };
    let mut out = vec![(dt, y)];
    out.extend(std::iter::repeat_n((dt, state), states));
    out
}

/// ONNX's LSTM (`gates` 4, two state outputs), GRU (3, one) or RNN (1, one).
struct Recurrent {
    gates: usize,
    states: usize,
}

impl Kernel for Recurrent {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, x, w) = sequence(n, ins)?;
        let hidden = match n.int("hidden_size", 0) {
            h if h > 0 => h as usize,
            _ => w[1] / self.gates,
        };
        let batch_first = n.int("layout", 0) == 1;
        let (seq, batch) = match batch_first {
            true => (x[1], x[0]),
            false => (x[0], x[1]),
        };
        let dims = (seq, batch, w[0], hidden);
        Ok(recurrent_facts(dt, dims, batch_first, self.states))
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let inputs = (0..n.proto.input.len())
            .map(|k| f64s_opt(ins, k))
            .collect::<TractResult<Vec<_>>>()?;
        let outs = match self.gates {
            3 => rnn::gru(&n.proto, &inputs),
            1 => rnn::rnn(&n.proto, &inputs),
            _ => rnn::lstm(&n.proto, &inputs),
        }
        .map_err(|e| anyhow::anyhow!(e))?;
        Ok(outs.into_iter().map(tensor).collect())
    }
}

/// Whether phantom evaluates this node from parsing on: ONNX's LSTM, GRU and RNN (in ONNX's domain, however it is
/// spelled); tract's own expansion never computes them.
pub fn claims_recurrent(n: &tract_onnx::pb::NodeProto) -> bool {
    matches!(n.domain.as_str(), "" | "ai.onnx")
        && matches!(n.op_type.as_str(), "LSTM" | "GRU" | "RNN")
}
