//! ORT's `DynamicQuantizeLSTM` (what `onnxruntime.quantization.quantize_dynamic` makes of an LSTM) on phantom's
//! f64 LSTM ([`crate::runner::reference::rnn::dq_lstm`]), with activations requantized as ORT's CPU kernel does.

use tract_onnx::prelude::*;

use super::super::rnn;
use super::util::{f64s_opt, fact, float_type, tensor};
use super::{Fact, Kernel, Node};

pub const OPS: &[&str] = &["DynamicQuantizeLSTM"];

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

pub fn kernel(op: &str) -> Option<&'static dyn Kernel> {
    (op == "DynamicQuantizeLSTM").then_some(&DqLstm as &dyn Kernel)
}
