//! phantom's own f64 ONNX `LSTM` (tract fuses its cell into an f32-only epilogue). Follows the ONNX spec:
//! gates i, o, f, c; default activations (Sigmoid, Tanh, Tanh); forward, reverse and bidirectional; biases,
//! peepholes, `sequence_lens`, initial states, `layout`, `clip` and `input_forget`.

use ndarray::{s, Array2, Array3, Array4, ArrayD, Axis, Ix2, Ix3};
use tract_onnx::pb::NodeProto;

use super::kernels::sigmoid;

fn attr_i(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn dims3(a: &ArrayD<f64>, what: &str) -> Result<Array3<f64>, String> {
    a.clone()
        .into_dimensionality::<Ix3>()
        .map_err(|_| format!("LSTM {what} must have rank 3"))
}

/// Evaluates an ONNX LSTM node. `inputs[k]` is the k-th ONNX input (None when omitted), as f64.
/// Returns (Y, Y_h, Y_c).
pub fn lstm(node: &NodeProto, inputs: &[Option<ArrayD<f64>>]) -> Result<[ArrayD<f64>; 3], String> {
    let get = |k: usize| inputs.get(k).and_then(|v| v.as_ref());
    for a in &node.attribute {
        if a.name == "activations" {
            let acts: Vec<String> = a
                .strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).to_lowercase())
                .collect();
            if acts.chunks(3).any(|c| c != ["sigmoid", "tanh", "tanh"]) {
                return Err(format!(
                    "LSTM activations {acts:?} are not supported by phantom's f64 LSTM"
                ));
            }
        }
    }
    let layout = attr_i(node, "layout").unwrap_or(0);
    let input_forget = attr_i(node, "input_forget").unwrap_or(0) != 0;
    let clip = node
        .attribute
        .iter()
        .find(|a| a.name == "clip")
        .map(|a| a.f as f64);
    let mut x = dims3(get(0).ok_or("LSTM without X")?, "X")?;
    if layout == 1 {
        x = x.permuted_axes([1, 0, 2]).as_standard_layout().to_owned();
    }
    let w = dims3(get(1).ok_or("LSTM without W")?, "W")?;
    let r = dims3(get(2).ok_or("LSTM without R")?, "R")?;
    let (seq, batch, _) = x.dim();
    let (dirs, four_h, _) = w.dim();
    let h = four_h / 4;
    let b = match get(3) {
        Some(b) => b
            .clone()
            .into_dimensionality::<Ix2>()
            .map_err(|_| "LSTM B must have rank 2")?,
        None => Array2::zeros((dirs, 8 * h)),
    };
    let lens: Vec<usize> = match get(4) {
        Some(l) => l.iter().map(|&v| v as usize).collect(),
        None => vec![seq; batch],
    };
    let init = |k: usize| -> Result<Array3<f64>, String> {
        match get(k) {
            Some(a) => {
                let a = dims3(a, "initial state")?;
                Ok(if layout == 1 {
                    a.permuted_axes([1, 0, 2]).as_standard_layout().to_owned()
                } else {
                    a
                })
            }
            None => Ok(Array3::zeros((dirs, batch, h))),
        }
    };
    let (h0, c0) = (init(5)?, init(6)?);
    let p = match get(7) {
        Some(p) => p
            .clone()
            .into_dimensionality::<Ix2>()
            .map_err(|_| "LSTM P must have rank 2")?,
        None => Array2::zeros((dirs, 3 * h)),
    };
    let reverse_only = node
        .attribute
        .iter()
        .any(|a| a.name == "direction" && a.s == b"reverse");
    let mut y = Array4::<f64>::zeros((seq, dirs, batch, h));
    let mut yh = Array3::<f64>::zeros((dirs, batch, h));
    let mut yc = Array3::<f64>::zeros((dirs, batch, h));
    let act = |v: f64| clip.map_or(v, |c| v.clamp(-c, c));
    for d in 0..dirs {
        let backward = reverse_only || d == 1;
        let (wd, rd) = (w.index_axis(Axis(0), d), r.index_axis(Axis(0), d));
        let (bd, pd) = (b.row(d), p.row(d));
        for bi in 0..batch {
            let len = lens[bi].min(seq);
            let mut hs: Vec<f64> = h0.slice(s![d, bi, ..]).to_vec();
            let mut cs: Vec<f64> = c0.slice(s![d, bi, ..]).to_vec();
            for step in 0..len {
                let t = if backward { len - 1 - step } else { step };
                let xt = x.slice(s![t, bi, ..]);
                // gates[g*h + j] = W x + R h + Wb + Rb, g in (i, o, f, c)
                let mut gates = vec![0.0; 4 * h];
                for (k, g) in gates.iter_mut().enumerate() {
                    let wx: f64 = wd.row(k).iter().zip(xt.iter()).map(|(a, b)| a * b).sum();
                    let rh: f64 = rd.row(k).iter().zip(hs.iter()).map(|(a, b)| a * b).sum();
                    *g = wx + rh + bd[k] + bd[4 * h + k];
                }
                for j in 0..h {
                    let i_g = sigmoid(act(gates[j] + pd[j] * cs[j]));
                    let f_g = if input_forget {
                        1.0 - i_g
                    } else {
                        sigmoid(act(gates[2 * h + j] + pd[2 * h + j] * cs[j]))
                    };
                    let c_g = act(gates[3 * h + j]).tanh();
                    cs[j] = f_g * cs[j] + i_g * c_g;
                    let o_g = sigmoid(act(gates[h + j] + pd[h + j] * cs[j]));
                    hs[j] = o_g * cs[j].tanh();
                }
                for j in 0..h {
                    y[[t, d, bi, j]] = hs[j];
                }
            }
            for j in 0..h {
                yh[[d, bi, j]] = hs[j];
                yc[[d, bi, j]] = cs[j];
            }
        }
    }
    let (y, yh, yc) = if layout == 1 {
        (
            y.permuted_axes([2, 0, 1, 3])
                .as_standard_layout()
                .to_owned()
                .into_dyn(),
            yh.permuted_axes([1, 0, 2])
                .as_standard_layout()
                .to_owned()
                .into_dyn(),
            yc.permuted_axes([1, 0, 2])
                .as_standard_layout()
                .to_owned()
                .into_dyn(),
        )
    } else {
        (y.into_dyn(), yh.into_dyn(), yc.into_dyn())
    };
    Ok([y, yh, yc])
}
