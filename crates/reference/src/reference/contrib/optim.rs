//! The training optimizers of `ai.onnx.preview.training` in f64 (tract has none): `Adagrad`, `Adam` and `Momentum`
//! (standard or Nesterov), one update step of every tensor they are given. Inputs are the learning rate R and the
//! step count T (scalars), then the n tensors X₁…Xₙ, their gradients G₁…Gₙ, and their n (Adagrad, Momentum: one
//! state) or 2n (Adam: first and second moments) accumulated states; outputs are the new X₁…Xₙ, then the new
//! states in the same order. Each element is updated as ONNX's operator definitions (and its reference,
//! onnx/reference/ops/aionnx_preview_training) write it.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, float_type, opt, shaped, values};

/// Claimed in any domain: tract lacks the training optimizers, whose domain `ai.onnx.preview.training` is
/// neither ONNX's nor ORT's.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("Adagrad", &Optimizer(Kind::Adagrad)),
    Row::any_domain("Adam", &Optimizer(Kind::Adam)),
    Row::any_domain("Momentum", &Optimizer(Kind::Momentum)),
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Adagrad,
    Adam,
    Momentum,
}

/// One node's hyper-parameters (those its kind does not use are left at their defaults).
struct Hyper {
    kind: Kind,
    norm: f64,
    norm_post: f64,
    alpha: f64,
    beta: f64,
    epsilon: f64,
    decay: f64,
    nesterov: bool,
}

impl Kind {
    /// How many states each tensor carries.
    fn states(self) -> usize {
        match self {
            Kind::Adam => 2,
            _ => 1,
        }
    }
}

impl Hyper {
    fn new(n: &Node, kind: Kind) -> TractResult<Hyper> {
        let name = &n.proto.name;
        if kind == Kind::Momentum {
            for a in ["alpha", "beta", "mode", "norm_coefficient"] {
                anyhow::ensure!(
                    n.proto.attribute.iter().any(|x| x.name == a),
                    "{INVALID}Momentum `{name}` lacks its required attribute `{a}`"
                );
            }
        }
        let nesterov = match super::util::string(n, "mode", "standard").as_str() {
            "standard" => false,
            "nesterov" => true,
            m => anyhow::bail!(
                "{INVALID}Momentum `{name}`: unknown mode `{m}` (standard or nesterov)"
            ),
        };
        let adam = kind == Kind::Adam;
        Ok(Hyper {
            kind,
            norm: n.float("norm_coefficient", 0.0),
            norm_post: n.float("norm_coefficient_post", 0.0),
            alpha: n.float("alpha", if adam { 0.9 } else { 0.0 }),
            beta: n.float("beta", if adam { 0.999 } else { 0.0 }),
            epsilon: n.float("epsilon", 0.0),
            decay: n.float("decay_factor", 0.0),
            nesterov,
        })
    }

    /// One element's step: the new x and its new states (`s[1]` only for Adam), from learning rate `r`, step `t`,
    /// the element `x`, its gradient `g` and its states `s`.
    fn step(&self, r: f64, t: f64, x: f64, g: f64, s: [f64; 2]) -> [f64; 3] {
        let g = self.norm * x + g;
        match self.kind {
            Kind::Adagrad => {
                let h = s[0] + g * g;
                let rate = r / (1.0 + t * self.decay);
                [x - rate * g / (h.sqrt() + self.epsilon), h, 0.0]
            }
            Kind::Adam => {
                let v = self.alpha * s[0] + (1.0 - self.alpha) * g;
                let h = self.beta * s[1] + (1.0 - self.beta) * g * g;
                let rate = match t > 0.0 {
                    true => r * (1.0 - self.beta.powf(t)).sqrt() / (1.0 - self.alpha.powf(t)),
                    false => r,
                };
                let x = x - rate * v / (h.sqrt() + self.epsilon);
                [(1.0 - self.norm_post) * x, v, h]
            }
            Kind::Momentum => {
                let beta = if t > 0.0 { self.beta } else { 1.0 };
                let v = self.alpha * s[0] + beta * g;
                let dx = if self.nesterov { g + self.alpha * v } else { v };
                [x - r * dx, v, 0.0]
            }
        }
    }
}

/// The number of tensors a node updates: (inputs − 2) / (2 + states), which must divide.
fn tensors(n: &Node, kind: Kind) -> TractResult<usize> {
    let per = 2 + kind.states();
    let inputs = n.proto.input.len();
    let count = inputs.saturating_sub(2) / per;
    anyhow::ensure!(
        count >= 1 && inputs == 2 + per * count && n.proto.output.len() == (1 + kind.states()) * count,
        "{INVALID}{} `{}`: {inputs} inputs and {} outputs do not make R, T and {per} inputs and {} outputs per tensor",
        n.op(),
        n.proto.name,
        n.proto.output.len(),
        1 + kind.states()
    );
    Ok(count)
}

struct Optimizer(Kind);

impl Kernel for Optimizer {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let count = tensors(n, self.0)?;
        let xs: Vec<Fact> = (0..count)
            .map(|i| {
                let x = fact(n, ins, 2 + i)?;
                for k in 1..2 + self.0.states() {
                    let other = &fact(n, ins, 2 + k * count + i)?.1;
                    anyhow::ensure!(
                        other == &x.1,
                        "{INVALID}{} `{}`: input {} has shape {other:?}, its tensor X {:?}",
                        n.op(),
                        n.proto.name,
                        2 + k * count + i,
                        x.1
                    );
                }
                Ok((float_type(n, x)?, x.1.clone()))
            })
            .collect::<TractResult<_>>()?;
        Ok((0..1 + self.0.states()).flat_map(|_| xs.clone()).collect())
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (hyper, count) = (Hyper::new(n, self.0)?, tensors(n, self.0)?);
        let scalar = |k: usize, what: &str| -> TractResult<f64> {
            let v = values::<f64>(opt(n, ins, k)?)?;
            anyhow::ensure!(
                v.len() == 1,
                "{INVALID}{} `{}`: {what} has {} elements, not one",
                n.op(),
                n.proto.name,
                v.len()
            );
            Ok(v[0])
        };
        let (r, t) = (scalar(0, "R")?, scalar(1, "T")?);
        let states = self.0.states();
        let mut outs: Vec<Vec<Tensor>> = vec![vec![]; 1 + states];
        for i in 0..count {
            let read = |k: usize| values::<f64>(opt(n, ins, 2 + k * count + i)?);
            let (x, g) = (read(0)?, read(1)?);
            let s: Vec<Vec<f64>> = (0..states)
                .map(|k| read(2 + k))
                .collect::<TractResult<_>>()?;
            let mut new: Vec<Vec<f64>> = vec![Vec::with_capacity(x.len()); 1 + states];
            for e in 0..x.len() {
                let state = [s[0][e], s.get(1).map_or(0.0, |v| v[e])];
                let step = hyper.step(r, t, x[e], g[e], state);
                new.iter_mut().zip(step).for_each(|(v, y)| v.push(y));
            }
            let shape = opt(n, ins, 2 + i)?.shape().to_vec();
            for (o, v) in outs.iter_mut().zip(new) {
                o.push(shaped(&shape, v)?);
            }
        }
        Ok(outs.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hyper(kind: Kind) -> Hyper {
        Hyper {
            kind,
            norm: 0.0,
            norm_post: 0.0,
            alpha: 0.5,
            beta: 0.25,
            epsilon: 0.0,
            decay: 0.0,
            nesterov: false,
        }
    }

    #[test]
    fn one_step_of_each_rule() {
        // Adagrad: h = 0 + 2² = 4; x = 1 − 0.1·2/√4 = 0.9.
        let [x, h, _] = hyper(Kind::Adagrad).step(0.1, 0.0, 1.0, 2.0, [0.0, 0.0]);
        assert!((x - 0.9).abs() < 1e-15 && h == 4.0);
        // Momentum, first step (β taken as 1): v = 0.5·1 + 2 = 2.5; x = 1 − 0.1·2.5.
        let [x, v, _] = hyper(Kind::Momentum).step(0.1, 0.0, 1.0, 2.0, [1.0, 0.0]);
        assert!((x - 0.75).abs() < 1e-15 && v == 2.5);
        // Nesterov: x = 1 − 0.1·(2 + 0.5·2.5).
        let nesterov = Hyper {
            nesterov: true,
            ..hyper(Kind::Momentum)
        };
        let [x, _, _] = nesterov.step(0.1, 0.0, 1.0, 2.0, [1.0, 0.0]);
        assert!((x - 0.675).abs() < 1e-15);
    }

    #[test]
    fn adam_corrects_its_moments_after_the_first_step() {
        // v = 0.5·2 = 1, h = 0.75·4 = 3; without correction (t = 0) x = 1 − 0.1·1/√3.
        let [x, v, h] = hyper(Kind::Adam).step(0.1, 0.0, 1.0, 2.0, [0.0, 0.0]);
        assert!((x - (1.0 - 0.1 / 3f64.sqrt())).abs() < 1e-15 && v == 1.0 && h == 3.0);
        // t = 1: the rate is scaled by √(1 − β)/(1 − α) = √0.75/0.5.
        let [x, _, _] = hyper(Kind::Adam).step(0.1, 1.0, 1.0, 2.0, [0.0, 0.0]);
        let rate = 0.1 * 0.75f64.sqrt() / 0.5;
        assert!((x - (1.0 - rate / 3f64.sqrt())).abs() < 1e-15);
    }
}
