//! phantom's own f64 ONNX `LSTM` and `GRU` (tract fuses their cells into f32-only kernels). Both follow the ONNX
//! spec: default activations (LSTM: Sigmoid, Tanh, Tanh; GRU: Sigmoid, Tanh); forward, reverse and bidirectional;
//! biases, `sequence_lens` (outputs past a sequence's end stay zero), initial states, `layout` and `clip`; LSTM's
//! peepholes and `input_forget`, GRU's `linear_before_reset`. The simple `RNN` too, with any of the spec's
//! activations. Also ORT's contrib `DynamicQuantizeLSTM` (int8/uint8 weights, activations requantized per GEMM call
//! as ORT's CPU kernel does).

use ndarray::{s, Array2, Array3, Array4, ArrayD, ArrayView1, ArrayView2, Axis, Ix2, Ix3};
use tract_onnx::pb::NodeProto;

use super::kernels::sigmoid;

fn attr_i(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn dims3(a: &ArrayD<f64>, what: &str) -> Result<Array3<f64>, String> {
    a.clone()
        .into_dimensionality::<Ix3>()
        .map_err(|_| format!("{what} must have rank 3"))
}

/// What LSTM and GRU share: the sequence, the weights, the directions, sequence lengths and the layout.
struct Recurrence {
    op: &'static str,
    /// X as [seq, batch, input].
    x: Array3<f64>,
    w: Array3<f64>,
    r: Array3<f64>,
    /// B as [dirs, 2 · gates · hidden] (zeros when absent).
    b: Array2<f64>,
    lens: Vec<usize>,
    hidden: usize,
    layout: i64,
    clip: Option<f64>,
    reverse_only: bool,
}

impl Recurrence {
    /// Reads the inputs and attributes; `gates` is 4 for LSTM, 3 for GRU, `acts` the only activations supported.
    fn read(
        op: &'static str,
        node: &NodeProto,
        inputs: &[Option<ArrayD<f64>>],
        gates: usize,
        acts: &[&str],
    ) -> Result<Recurrence, String> {
        let get = |k: usize| inputs.get(k).and_then(|v| v.as_ref());
        if let Some(a) = (node.attribute.iter())
            .find(|a| a.name == "activations")
            .filter(|_| !acts.is_empty())
        {
            let given: Vec<String> = a
                .strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).to_lowercase())
                .collect();
            if given.chunks(acts.len()).any(|c| c != acts) {
                return Err(format!(
                    "{op} activations {given:?} are not supported by phantom's f64 {op}"
                ));
            }
        }
        let layout = attr_i(node, "layout").unwrap_or(0);
        let mut x = dims3(get(0).ok_or(format!("{op} without X"))?, &format!("{op} X"))?;
        if layout == 1 {
            x = x.permuted_axes([1, 0, 2]).as_standard_layout().to_owned();
        }
        let w = dims3(get(1).ok_or(format!("{op} without W"))?, &format!("{op} W"))?;
        let r = dims3(get(2).ok_or(format!("{op} without R"))?, &format!("{op} R"))?;
        let (seq, batch, _) = x.dim();
        let (dirs, rows, _) = w.dim();
        let hidden = rows / gates;
        let b = match get(3) {
            Some(b) => b
                .clone()
                .into_dimensionality::<Ix2>()
                .map_err(|_| format!("{op} B must have rank 2"))?,
            None => Array2::zeros((dirs, 2 * gates * hidden)),
        };
        let lens = match get(4) {
            Some(l) => l.iter().map(|&v| (v.max(0.0) as usize).min(seq)).collect(),
            None => vec![seq; batch],
        };
        if lens.len() != batch {
            return Err(format!(
                "{op} sequence_lens has {} entries for a batch of {batch}",
                lens.len()
            ));
        }
        let clip = node
            .attribute
            .iter()
            .find(|a| a.name == "clip")
            .map(|a| a.f as f64);
        let reverse_only = node
            .attribute
            .iter()
            .any(|a| a.name == "direction" && a.s == b"reverse");
        Ok(Recurrence {
            op,
            x,
            w,
            r,
            b,
            lens,
            hidden,
            layout,
            clip,
            reverse_only,
        })
    }

    fn dirs(&self) -> usize {
        self.w.dim().0
    }

    /// An initial state input (`[dirs, batch, hidden]`, or batch first under `layout` 1), zeros when absent.
    fn initial(&self, a: Option<&ArrayD<f64>>) -> Result<Array3<f64>, String> {
        let (_, batch, _) = self.x.dim();
        match a {
            Some(a) => {
                let a = dims3(a, &format!("{} initial state", self.op))?;
                Ok(if self.layout == 1 {
                    a.permuted_axes([1, 0, 2]).as_standard_layout().to_owned()
                } else {
                    a
                })
            }
            None => Ok(Array3::zeros((self.dirs(), batch, self.hidden))),
        }
    }

    /// The time index of `step` in direction `d` of a sequence of `len`.
    fn time(&self, d: usize, len: usize, step: usize) -> usize {
        match self.reverse_only || d == 1 {
            true => len - 1 - step,
            false => step,
        }
    }

    /// The time steps of one direction, in the order they are taken.
    fn steps(&self, d: usize, len: usize) -> impl Iterator<Item = usize> + '_ {
        (0..len).map(move |step| self.time(d, len, step))
    }

    fn clipped(&self, v: f64) -> f64 {
        self.clip.map_or(v, |c| v.clamp(-c, c))
    }

    /// Y in the caller's layout.
    fn y_out(&self, y: Array4<f64>) -> ArrayD<f64> {
        match self.layout {
            1 => y
                .permuted_axes([2, 0, 1, 3])
                .as_standard_layout()
                .to_owned()
                .into_dyn(),
            _ => y.into_dyn(),
        }
    }

    /// A final state in the caller's layout.
    fn state_out(&self, s: Array3<f64>) -> ArrayD<f64> {
        match self.layout {
            1 => s
                .permuted_axes([1, 0, 2])
                .as_standard_layout()
                .to_owned()
                .into_dyn(),
            _ => s.into_dyn(),
        }
    }
}

fn dot(a: ArrayView1<f64>, b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Row k of `m` times `v`, for every k.
fn matvec(m: &ArrayView2<f64>, v: &[f64]) -> Vec<f64> {
    m.rows().into_iter().map(|row| dot(row, v)).collect()
}

/// Evaluates an ONNX LSTM node. `inputs[k]` is the k-th ONNX input (None when omitted), as f64.
/// Returns (Y, Y_h, Y_c).
pub fn lstm(node: &NodeProto, inputs: &[Option<ArrayD<f64>>]) -> Result<Vec<ArrayD<f64>>, String> {
    let rc = Recurrence::read("LSTM", node, inputs, 4, &["sigmoid", "tanh", "tanh"])?;
    lstm_with(&rc, node, inputs, None)
}

/// Requantizes a matrix of hidden states, as ORT's quantized recurrent product reads them.
pub type Requantize<'a> = &'a dyn Fn(&[f64]) -> Vec<f64>;

/// The LSTM recurrence of `rc`, steps outer and batch rows inner. With `requantize`, the hidden state each step's
/// recurrent product reads is requantized first, per sequence (see [`dq_lstm`]).
fn lstm_with(
    rc: &Recurrence,
    node: &NodeProto,
    inputs: &[Option<ArrayD<f64>>],
    requantize: Option<Requantize>,
) -> Result<Vec<ArrayD<f64>>, String> {
    let get = |k: usize| inputs.get(k).and_then(|v| v.as_ref());
    let input_forget = attr_i(node, "input_forget").unwrap_or(0) != 0;
    let (h0, c0) = (rc.initial(get(5))?, rc.initial(get(6))?);
    let (seq, batch, _) = rc.x.dim();
    let (dirs, h) = (rc.dirs(), rc.hidden);
    let p = match get(7) {
        Some(p) => p
            .clone()
            .into_dimensionality::<Ix2>()
            .map_err(|_| "LSTM P must have rank 2")?,
        None => Array2::zeros((dirs, 3 * h)),
    };
    let mut y = Array4::<f64>::zeros((seq, dirs, batch, h));
    let mut yh = Array3::<f64>::zeros((dirs, batch, h));
    let mut yc = Array3::<f64>::zeros((dirs, batch, h));
    let max_len = rc.lens.iter().copied().max().unwrap_or(0);
    for d in 0..dirs {
        let (wd, rd) = (rc.w.index_axis(Axis(0), d), rc.r.index_axis(Axis(0), d));
        let (bd, pd) = (rc.b.row(d), p.row(d));
        let mut hs: Vec<Vec<f64>> = (0..batch)
            .map(|bi| h0.slice(s![d, bi, ..]).to_vec())
            .collect();
        let mut cs: Vec<Vec<f64>> = (0..batch)
            .map(|bi| c0.slice(s![d, bi, ..]).to_vec())
            .collect();
        for step in 0..max_len {
            let read = recurrent_reads(&hs, requantize);
            for bi in (0..batch).filter(|&bi| step < rc.lens[bi]) {
                let t = rc.time(d, rc.lens[bi], step);
                let xt = rc.x.slice(s![t, bi, ..]).to_vec();
                // gates[g*h + j] = W x + R h + Wb + Rb, g in (i, o, f, c)
                let (wx, rh) = (matvec(&wd, &xt), matvec(&rd, &read[bi]));
                let gates: Vec<f64> = (0..4 * h)
                    .map(|k| wx[k] + rh[k] + bd[k] + bd[4 * h + k])
                    .collect();
                let (hb, cb) = (&mut hs[bi], &mut cs[bi]);
                for j in 0..h {
                    let i_g = sigmoid(rc.clipped(gates[j] + pd[j] * cb[j]));
                    let f_g = match input_forget {
                        true => 1.0 - i_g,
                        false => sigmoid(rc.clipped(gates[2 * h + j] + pd[2 * h + j] * cb[j])),
                    };
                    let c_g = rc.clipped(gates[3 * h + j]).tanh();
                    cb[j] = f_g * cb[j] + i_g * c_g;
                    let o_g = sigmoid(rc.clipped(gates[h + j] + pd[h + j] * cb[j]));
                    hb[j] = o_g * cb[j].tanh();
                }
                y.slice_mut(s![t, d, bi, ..]).assign(&ndarray::aview1(hb));
            }
        }
        for bi in 0..batch {
            yh.slice_mut(s![d, bi, ..])
                .assign(&ndarray::aview1(&hs[bi]));
            yc.slice_mut(s![d, bi, ..])
                .assign(&ndarray::aview1(&cs[bi]));
        }
    }
    Ok(vec![rc.y_out(y), rc.state_out(yh), rc.state_out(yc)])
}

/// The hidden state each batch row's recurrent product reads: its own, requantized with `requantize`.
fn recurrent_reads(hs: &[Vec<f64>], requantize: Option<Requantize>) -> Vec<Vec<f64>> {
    match requantize {
        Some(q) => hs.iter().map(|row| q(row)).collect(),
        None => hs.to_vec(),
    }
}

/// Evaluates ORT's DynamicQuantizeLSTM: W `[dirs, input, 4H]` and R `[dirs, H, 4H]` quantized with per-direction
/// (or per-column) scales, dequantized exactly (ORT uses only the first zero point of a direction; so does this);
/// X requantized per tensor over the steps ORT computes, and each step's hidden state per sequence, by
/// `requantize`. ORT's quantized GEMM requantizes its A operand on every call, and its CPU kernel groups
/// ⌈batch / threads⌉ sequences per call when it splits the batch across threads (batch > 4, or ≥ 2 with hidden ≤
/// 256), all of them otherwise: its result depends on its thread count. The reference takes one sequence per
/// group, which is ORT's grouping at batch 1 and whenever it has a thread per sequence. Returns (Y, Y_h, Y_c).
pub fn dq_lstm(
    node: &NodeProto,
    inputs: &[Option<ArrayD<f64>>],
    requantize: Requantize,
) -> Result<Vec<ArrayD<f64>>, String> {
    let get = |k: usize| inputs.get(k).and_then(|v| v.as_ref());
    let weights = |k: usize, scale: usize, zero: usize| -> Result<ArrayD<f64>, String> {
        let q = dims3(
            get(k).ok_or(format!("DynamicQuantizeLSTM lacks input {k}"))?,
            "DynamicQuantizeLSTM weights",
        )?;
        let (dirs, _, cols) = q.dim();
        let s = get(scale).ok_or(format!("DynamicQuantizeLSTM lacks input {scale}"))?;
        let per_col = s.len() == dirs * cols;
        let z = get(zero);
        let mut w = Array3::<f64>::zeros((dirs, cols, q.dim().1));
        for ((d, r, c), v) in q.indexed_iter() {
            let zp = z
                .and_then(|z| z.iter().nth(d * z.len() / dirs.max(1)))
                .copied()
                .unwrap_or(0.0);
            let sc = if per_col {
                s.iter().nth(d * cols + c)
            } else {
                s.iter().nth(d)
            };
            w[[d, c, r]] = (v - zp) * sc.copied().ok_or("DynamicQuantizeLSTM scale too short")?;
        }
        Ok(w.into_dyn())
    };
    let mut ins: Vec<Option<ArrayD<f64>>> = inputs.iter().take(8).cloned().collect();
    ins.resize(8, None);
    ins[1] = Some(weights(1, 8, 9)?);
    ins[2] = Some(weights(2, 10, 11)?);
    let mut rc = Recurrence::read(
        "DynamicQuantizeLSTM",
        node,
        &ins,
        4,
        &["sigmoid", "tanh", "tanh"],
    )?;
    let max_len = rc.lens.iter().copied().max().unwrap_or(0);
    let computed: Vec<f64> = rc.x.slice(s![..max_len, .., ..]).iter().copied().collect();
    let requantized = requantize(&computed);
    rc.x.slice_mut(s![..max_len, .., ..])
        .iter_mut()
        .zip(requantized)
        .for_each(|(x, q)| *x = q);
    lstm_with(&rc, node, &ins, Some(requantize))
}

/// Evaluates an ONNX GRU node (gates z, r, h). `inputs[k]` is the k-th ONNX input (None when omitted), as f64.
/// Returns (Y, Y_h).
pub fn gru(node: &NodeProto, inputs: &[Option<ArrayD<f64>>]) -> Result<Vec<ArrayD<f64>>, String> {
    let rc = Recurrence::read("GRU", node, inputs, 3, &["sigmoid", "tanh"])?;
    let linear_before_reset = attr_i(node, "linear_before_reset").unwrap_or(0) != 0;
    let h0 = rc.initial(inputs.get(5).and_then(|v| v.as_ref()))?;
    let (seq, batch, _) = rc.x.dim();
    let (dirs, h) = (rc.dirs(), rc.hidden);
    let mut y = Array4::<f64>::zeros((seq, dirs, batch, h));
    let mut yh = Array3::<f64>::zeros((dirs, batch, h));
    for d in 0..dirs {
        let (wd, rd) = (rc.w.index_axis(Axis(0), d), rc.r.index_axis(Axis(0), d));
        let bd = rc.b.row(d);
        let (wb, rb) = (|k: usize| bd[k], |k: usize| bd[3 * h + k]);
        for bi in 0..batch {
            let mut hs: Vec<f64> = h0.slice(s![d, bi, ..]).to_vec();
            for t in rc.steps(d, rc.lens[bi]) {
                let xt = rc.x.slice(s![t, bi, ..]).to_vec();
                let wx = matvec(&wd, &xt);
                let rh = matvec(&rd.slice(s![..2 * h, ..]), &hs);
                let z: Vec<f64> = (0..h)
                    .map(|j| sigmoid(rc.clipped(wx[j] + rh[j] + wb(j) + rb(j))))
                    .collect();
                let r: Vec<f64> = (0..h)
                    .map(|j| sigmoid(rc.clipped(wx[h + j] + rh[h + j] + wb(h + j) + rb(h + j))))
                    .collect();
                let rh_h = rd.slice(s![2 * h.., ..]);
                // ONNX: linear_before_reset applies r after (R_h · H + Rb_h); otherwise to H before R_h.
                let recurrent: Vec<f64> = match linear_before_reset {
                    true => matvec(&rh_h, &hs)
                        .iter()
                        .enumerate()
                        .map(|(j, v)| r[j] * (v + rb(2 * h + j)))
                        .collect(),
                    false => {
                        let reset: Vec<f64> = hs.iter().zip(&r).map(|(a, b)| a * b).collect();
                        matvec(&rh_h, &reset)
                            .iter()
                            .enumerate()
                            .map(|(j, v)| v + rb(2 * h + j))
                            .collect()
                    }
                };
                for j in 0..h {
                    let cand = rc
                        .clipped(wx[2 * h + j] + wb(2 * h + j) + recurrent[j])
                        .tanh();
                    hs[j] = (1.0 - z[j]) * cand + z[j] * hs[j];
                }
                y.slice_mut(s![t, d, bi, ..]).assign(&ndarray::aview1(&hs));
            }
            yh.slice_mut(s![d, bi, ..]).assign(&ndarray::aview1(&hs));
        }
    }
    Ok(vec![rc.y_out(y), rc.state_out(yh)])
}

/// Evaluates an ONNX RNN node, `H_t = f(W x_t + R H_(t-1) + Wb + Rb)` with `f` per direction (default Tanh).
/// Returns (Y, Y_h).
pub fn rnn(node: &NodeProto, inputs: &[Option<ArrayD<f64>>]) -> Result<Vec<ArrayD<f64>>, String> {
    let rc = Recurrence::read("RNN", node, inputs, 1, &[])?;
    let h0 = rc.initial(inputs.get(5).and_then(|v| v.as_ref()))?;
    let (seq, batch, _) = rc.x.dim();
    let (dirs, h) = (rc.dirs(), rc.hidden);
    let acts = super::rnn_act::activations(node, dirs)?;
    let mut y = Array4::<f64>::zeros((seq, dirs, batch, h));
    let mut yh = Array3::<f64>::zeros((dirs, batch, h));
    for (d, act) in acts.iter().enumerate() {
        let (wd, rd) = (rc.w.index_axis(Axis(0), d), rc.r.index_axis(Axis(0), d));
        let bd = rc.b.row(d);
        for bi in 0..batch {
            let mut hs: Vec<f64> = h0.slice(s![d, bi, ..]).to_vec();
            for t in rc.steps(d, rc.lens[bi]) {
                let xt = rc.x.slice(s![t, bi, ..]).to_vec();
                let (wx, rh) = (matvec(&wd, &xt), matvec(&rd, &hs));
                hs = (0..h)
                    .map(|j| act.apply(rc.clipped(wx[j] + rh[j] + bd[j] + bd[h + j])))
                    .collect();
                y.slice_mut(s![t, d, bi, ..]).assign(&ndarray::aview1(&hs));
            }
            yh.slice_mut(s![d, bi, ..]).assign(&ndarray::aview1(&hs));
        }
    }
    Ok(vec![rc.y_out(y), rc.state_out(yh)])
}
