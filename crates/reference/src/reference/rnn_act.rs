//! The activation functions ONNX recurrent ops name in their `activations` attribute, in f64, with the
//! `activation_alpha`/`activation_beta` lists consumed in order by the activations that take them (as ONNX Runtime's
//! CPU kernels read them; the spec's defaults where a list runs short).

use tract_onnx::pb::NodeProto;

use super::kernels::sigmoid;

/// One activation with its parameters.
#[derive(Clone, Copy, Debug)]
pub(super) enum Activation {
    Relu,
    Tanh,
    Sigmoid,
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    ScaledTanh(f64, f64),
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

impl Activation {
    pub(super) fn apply(self, x: f64) -> f64 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => sigmoid(x),
            Activation::Affine(a, b) => a * x + b,
            Activation::LeakyRelu(a) => match x >= 0.0 {
                true => x,
                false => a * x,
            },
            Activation::ThresholdedRelu(a) => match x > a {
                true => x,
                false => 0.0,
            },
            Activation::ScaledTanh(a, b) => a * (b * x).tanh(),
            Activation::HardSigmoid(a, b) => (a * x + b).clamp(0.0, 1.0),
            Activation::Elu(a) => match x >= 0.0 {
                true => x,
                false => a * x.exp_m1(),
            },
            Activation::Softsign => x / (1.0 + x.abs()),
            Activation::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        }
    }
}

/// The single activation of each of `dirs` directions of a simple `RNN` (Tanh when the attribute is absent).
pub(super) fn activations(node: &NodeProto, dirs: usize) -> Result<Vec<Activation>, String> {
    let attr = |name: &str| node.attribute.iter().find(|a| a.name == name);
    let names: Vec<String> = match attr("activations") {
        Some(a) => (a.strings.iter())
            .map(|s| String::from_utf8_lossy(s).to_lowercase())
            .collect(),
        None => vec!["tanh".into(); dirs],
    };
    if names.len() != dirs {
        return Err(format!(
            "RNN has {} activations for {dirs} direction(s)",
            names.len()
        ));
    }
    let floats = |name: &str| attr(name).map_or(vec![], |a| a.floats.clone());
    let (mut alphas, mut betas) = (
        floats("activation_alpha").into_iter(),
        floats("activation_beta").into_iter(),
    );
    let mut alpha = |d: f64| alphas.next().map_or(d, f64::from);
    let mut beta = |d: f64| betas.next().map_or(d, f64::from);
    names
        .iter()
        .map(|n| {
            Ok(match n.as_str() {
                "relu" => Activation::Relu,
                "tanh" => Activation::Tanh,
                "sigmoid" => Activation::Sigmoid,
                "affine" => Activation::Affine(alpha(1.0), beta(0.0)),
                "leakyrelu" => Activation::LeakyRelu(alpha(0.01)),
                "thresholdedrelu" => Activation::ThresholdedRelu(alpha(1.0)),
                "scaledtanh" => Activation::ScaledTanh(alpha(1.0), beta(1.0)),
                "hardsigmoid" => Activation::HardSigmoid(alpha(0.2), beta(0.5)),
                "elu" => Activation::Elu(alpha(1.0)),
                "softsign" => Activation::Softsign,
                "softplus" => Activation::Softplus,
                other => {
                    return Err(format!(
                        "RNN activation `{other}` is not an ONNX activation"
                    ))
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ndarray::{ArrayD, IxDyn};
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn node(attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            op_type: "RNN".into(),
            attribute: attrs,
            ..Default::default()
        }
    }

    fn a(shape: &[usize], v: &[f64]) -> Option<ArrayD<f64>> {
        Some(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
    }

    /// A reverse RNN takes the sequence from its end: h₂ = tanh(x₂), h₁ = tanh(x₁ + ½h₂), h₀ = tanh(x₀ + ½h₁), and
    /// Y_h is h₀ (tract's reverse RNN was 0.34 off the conformance suite).
    #[test]
    fn a_reverse_rnn_runs_from_the_last_step() {
        let reverse = AttributeProto {
            name: "direction".into(),
            s: b"reverse".to_vec(),
            ..Default::default()
        };
        let x = a(&[3, 1, 1], &[1.0, 2.0, 3.0]);
        let (w, r) = (a(&[1, 1, 1], &[1.0]), a(&[1, 1, 1], &[0.5]));
        let out = super::super::rnn::rnn(&node(vec![reverse]), &[x, w, r]).unwrap();
        let h2 = 3f64.tanh();
        let h1 = (2.0 + 0.5 * h2).tanh();
        let h0 = (1.0 + 0.5 * h1).tanh();
        assert_eq!(out[0].iter().copied().collect::<Vec<_>>(), [h0, h1, h2]);
        assert_eq!(out[1].iter().copied().collect::<Vec<_>>(), [h0]);
    }

    #[test]
    fn activations_take_their_parameters_in_order() {
        let strings = AttributeProto {
            name: "activations".into(),
            strings: vec![b"LeakyRelu".to_vec(), b"HardSigmoid".to_vec()],
            ..Default::default()
        };
        let alpha = AttributeProto {
            name: "activation_alpha".into(),
            floats: vec![0.1, 0.3],
            ..Default::default()
        };
        let acts = super::activations(&node(vec![strings, alpha]), 2).unwrap();
        assert_eq!(acts[0].apply(-2.0), 0.1f32 as f64 * -2.0);
        // HardSigmoid's alpha is the list's second, its beta the default ½.
        assert_eq!(acts[1].apply(1.0), 0.3f32 as f64 + 0.5);
    }
}
