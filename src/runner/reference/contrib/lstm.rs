//! ORT's `DynamicQuantizeLSTM` (what `onnxruntime.quantization.quantize_dynamic` makes of an LSTM) on phantom's
//! f64 LSTM ([`crate::runner::reference::rnn::dq_lstm`]), with activations requantized as ORT's CPU kernel does;
//! and ONNX's own `LSTM` and `GRU` on phantom's f64 kernels ([`crate::runner::reference::rnn`]) from parsing on:
//! tract's expansion of them cannot be typed in f64 when an initial state is a graph input (a segment's boundary,
//! a streaming model's state), and computes in f32.

use tract_onnx::prelude::*;

use super::super::rnn;
use super::util::{f64s_opt, fact, float_type, tensor};
use super::{Fact, Kernel, Node};

pub const OPS: &[&str] = &["DynamicQuantizeLSTM", "LSTM", "GRU"];

struct DqLstm;

impl Kernel for DqLstm {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let w = fact(n, ins, 1)?;
        let dt = float_type(n, x)?;
        anyhow::ensure!(
            x.1.len() == 3 && w.1.len() == 3,
            "DynamicQuantizeLSTM wants X and W of rank 3"
        );
        let (seq, batch, dirs, hidden) = (x.1[0], x.1[1], w.1[0], w.1[2] / 4);
        let state = (dt, vec![dirs, batch, hidden]);
        Ok(vec![
            (dt, vec![seq, dirs, batch, hidden]),
            state.clone(),
            state,
        ])
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

/// ONNX's LSTM (`gates` 4) or GRU (3).
struct Recurrent {
    gates: usize,
}

impl Kernel for Recurrent {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let w = fact(n, ins, 1)?;
        let dt = float_type(n, x)?;
        anyhow::ensure!(
            x.1.len() == 3 && w.1.len() == 3,
            "{} wants X and W of rank 3",
            n.op()
        );
        let hidden = match n.int("hidden_size", 0) {
            h if h > 0 => h as usize,
            _ => w.1[1] / self.gates,
        };
        let dirs = w.1[0];
        let batch_first = n.int("layout", 0) == 1;
        let (seq, batch) = match batch_first {
            true => (x.1[1], x.1[0]),
            false => (x.1[0], x.1[1]),
        };
        let (y, state) = match batch_first {
            true => (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden]),
            false => (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden]),
        };
        let states = self.gates - 2;
        let mut out = vec![(dt, y)];
        out.extend(std::iter::repeat_n((dt, state), states));
        Ok(out)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let inputs = (0..n.proto.input.len())
            .map(|k| f64s_opt(ins, k))
            .collect::<TractResult<Vec<_>>>()?;
        let outs = match self.gates {
            3 => rnn::gru(&n.proto, &inputs),
            _ => rnn::lstm(&n.proto, &inputs),
        }
        .map_err(|e| anyhow::anyhow!(e))?;
        Ok(outs.into_iter().map(tensor).collect())
    }
}

/// Whether phantom evaluates this node from parsing on: ONNX's LSTM and GRU.
pub fn claims_recurrent(n: &tract_onnx::pb::NodeProto) -> bool {
    n.domain.is_empty() && matches!(n.op_type.as_str(), "LSTM" | "GRU")
}

pub fn kernel(op: &str) -> Option<&'static dyn Kernel> {
    match op {
        "DynamicQuantizeLSTM" => Some(&DqLstm),
        "LSTM" => Some(&Recurrent { gates: 4 }),
        "GRU" => Some(&Recurrent { gates: 3 }),
        _ => None,
    }
}
