//! ONNX `CausalConvWithState` (opset 27; tract has no kernel) in f64: a causal depthwise 1-D convolution with a
//! carried state. X (B, C, L), W (C, 1, K), bias (C) and past_state (B, C, K − 1) optional (zeros where absent).
//! The padded sequence P = past_state ++ X along the last axis (L + K − 1 long) gives
//! Y[b, c, l] = bias[c] + Σⱼ W[c, 0, j]·P[b, c, l + j], then `activation` `silu`/`swish` (the same: y·σ(y)) or
//! `none`; present_state is P's last K − 1 positions (so past values too where L < K − 1). As the spec and
//! ONNX's reference (op_causal_conv_with_state.py) compute it, in f64 where the reference takes float32 for the
//! activation.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, float_type, opt, shaped, string, values};

/// Claimed in any domain: tract has no kernel for CausalConvWithState.
pub(super) const TABLE: &[Row] = &[Row::any_domain("CausalConvWithState", &CausalConv)];

/// The extents of one node: batch, channels, length and kernel size.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Geo {
    batch: usize,
    channels: usize,
    len: usize,
    k: usize,
}

impl Geo {
    /// The extents from the shapes of X, W, bias and past_state (by ONNX slot), checked against each other.
    fn new(
        n: &Node,
        x: &[usize],
        w: &[usize],
        bias: Option<&[usize]>,
        past: Option<&[usize]>,
    ) -> TractResult<Geo> {
        let name = &n.proto.name;
        let [batch, channels, len] = x[..] else {
            anyhow::bail!(
                "CausalConvWithState `{name}`: input {x:?} must be (batch, channels, length)"
            );
        };
        anyhow::ensure!(
            w.len() == 3 && w[0] == channels && w[1] == 1 && w[2] >= 1,
            "CausalConvWithState `{name}`: weight {w:?} must be ({channels}, 1, k) with k ≥ 1"
        );
        let k = w[2];
        if let Some(b) = bias {
            anyhow::ensure!(
                b == [channels],
                "CausalConvWithState `{name}`: bias {b:?} must be ({channels})"
            );
        }
        if let Some(p) = past {
            anyhow::ensure!(
                p == [batch, channels, k - 1],
                "CausalConvWithState `{name}`: past_state {p:?} must be ({batch}, {channels}, {})",
                k - 1
            );
        }
        Ok(Geo {
            batch,
            channels,
            len,
            k,
        })
    }

    /// Output shapes by slot: output, present_state.
    fn shapes(&self) -> [Vec<usize>; 2] {
        let (b, c) = (self.batch, self.channels);
        [vec![b, c, self.len], vec![b, c, self.k - 1]]
    }
}

/// Whether the fused activation is SiLU (`silu`, `swish`) rather than `none`.
fn silu(n: &Node) -> TractResult<bool> {
    match string(n, "activation", "none").as_str() {
        "none" => Ok(false),
        "silu" | "swish" => Ok(true),
        other => anyhow::bail!(
            "CausalConvWithState `{}`: activation `{other}` is not one of none, silu, swish",
            n.proto.name
        ),
    }
}

/// One channel of one batch: the padded sequence `p` (K − 1 + L), its kernel `w` (K) and bias, into Y (L).
fn channel(p: &[f64], w: &[f64], bias: f64, silu: bool) -> Vec<f64> {
    p.windows(w.len())
        .map(|win| {
            let y = bias + win.iter().zip(w).map(|(a, b)| a * b).sum::<f64>();
            match silu {
                true => y / (1.0 + (-y).exp()),
                false => y,
            }
        })
        .collect()
}

struct CausalConv;

impl Kernel for CausalConv {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (x, w) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        let shape = |s: usize| ins.get(s).copied().flatten().map(|f| f.1.as_slice());
        let g = Geo::new(n, &x.1, &w.1, shape(2), shape(3))?;
        silu(n)?;
        let dt = float_type(n, x)?;
        let [y, present] = g.shapes();
        Ok(vec![(dt, y), (dt, present)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (x, w) = (opt(n, ins, 0)?, opt(n, ins, 1)?);
        let (bias, past) = (ins.get(2).copied().flatten(), ins.get(3).copied().flatten());
        let g = Geo::new(
            n,
            x.shape(),
            w.shape(),
            bias.map(|t| t.shape()),
            past.map(|t| t.shape()),
        )?;
        let act = silu(n)?;
        let (xs, ws) = (values::<f64>(x)?, values::<f64>(w)?);
        let bias = bias.map(values::<f64>).transpose()?;
        let past = past.map(values::<f64>).transpose()?;
        let (l, k) = (g.len, g.k);
        let (mut y, mut present) = (Vec::new(), Vec::new());
        for row in 0..g.batch * g.channels {
            let c = row % g.channels;
            let mut p = match &past {
                Some(s) => s[row * (k - 1)..(row + 1) * (k - 1)].to_vec(),
                None => vec![0.0; k - 1],
            };
            p.extend_from_slice(&xs[row * l..(row + 1) * l]);
            let b = bias.as_ref().map_or(0.0, |b| b[c]);
            y.extend(channel(&p, &ws[c * k..(c + 1) * k], b, act));
            present.extend_from_slice(&p[l..]);
        }
        let [ys, ps] = g.shapes();
        Ok(vec![shaped(&ys, y)?, shaped(&ps, present)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    /// A node with `inputs` ONNX input names ("" for absent), both outputs and an optional activation.
    fn node(inputs: &[&str], activation: Option<&str>) -> Node {
        let attribute = activation
            .map(|a| AttributeProto {
                name: "activation".into(),
                s: a.as_bytes().to_vec(),
                ..Default::default()
            })
            .into_iter()
            .collect();
        Node::new(&NodeProto {
            op_type: "CausalConvWithState".into(),
            name: "conv".into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into(), "present".into()],
            attribute,
            ..Default::default()
        })
    }

    fn t(shape: &[usize], v: &[f64]) -> Tensor {
        shaped(shape, v.to_vec()).unwrap()
    }

    fn run(n: &Node, ins: &[Option<&Tensor>]) -> Vec<Vec<f64>> {
        let outs = CausalConv.eval(n, ins).unwrap();
        outs.iter().map(|o| values::<f64>(o).unwrap()).collect()
    }

    #[test]
    fn zero_padding_then_past_state_feed_the_first_outputs() {
        // One channel, kernel [1, 10, 100]: y[l] = x[l−2] + 10·x[l−1] + 100·x[l].
        let (x, w) = (
            t(&[1, 1, 3], &[1.0, 2.0, 3.0]),
            t(&[1, 1, 3], &[1.0, 10.0, 100.0]),
        );
        let out = run(&node(&["x", "w"], None), &[Some(&x), Some(&w)]);
        assert_eq!(out[0], [100.0, 210.0, 321.0]);
        assert_eq!(out[1], [2.0, 3.0]);
        let past = t(&[1, 1, 2], &[5.0, 7.0]);
        let out = run(
            &node(&["x", "w", "", "p"], None),
            &[Some(&x), Some(&w), None, Some(&past)],
        );
        assert_eq!(out[0], [175.0, 217.0, 321.0]);
    }

    #[test]
    fn short_input_keeps_past_values_in_the_state() {
        // L = 1 < K − 1 = 2: the state shifts by one, keeping the newest past value.
        let (x, w, past) = (
            t(&[1, 1, 1], &[9.0]),
            t(&[1, 1, 3], &[0.0; 3]),
            t(&[1, 1, 2], &[5.0, 7.0]),
        );
        let out = run(
            &node(&["x", "w", "", "p"], None),
            &[Some(&x), Some(&w), None, Some(&past)],
        );
        assert_eq!(out[1], [7.0, 9.0]);
    }

    #[test]
    fn bias_is_per_channel_and_silu_follows_it() {
        // Two channels of kernel size 1 (an empty state), weights 1, biases 0 and 1.
        let (x, w, b) = (
            t(&[1, 2, 1], &[1.0, 1.0]),
            t(&[2, 1, 1], &[1.0, 1.0]),
            t(&[2], &[0.0, 1.0]),
        );
        let out = run(
            &node(&["x", "w", "b"], Some("swish")),
            &[Some(&x), Some(&w), Some(&b)],
        );
        let silu = |y: f64| y / (1.0 + (-y).exp());
        assert_eq!(out[0], [silu(1.0), silu(2.0)]);
        assert!(out[1].is_empty());
    }

    #[test]
    fn bad_shapes_and_activations_are_errors() {
        let (x, w) = (t(&[1, 1, 2], &[0.0; 2]), t(&[2, 1, 1], &[0.0; 2]));
        let err = CausalConv
            .eval(&node(&["x", "w"], None), &[Some(&x), Some(&w)])
            .unwrap_err();
        assert!(err.to_string().contains("`conv`"), "{err}");
        let w1 = t(&[1, 1, 1], &[0.0]);
        assert!(CausalConv
            .eval(&node(&["x", "w"], Some("relu")), &[Some(&x), Some(&w1)])
            .is_err());
    }
}
