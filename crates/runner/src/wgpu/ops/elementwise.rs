//! Element-wise ops: unary activations and math (`elementwise/unary.wgsl`, one op code each), broadcasting binary
//! arithmetic (`elementwise/binary.wgsl`), `Where`, `Clip`, float-to-float `Cast`/`CastLike` (a double held in f32:
//! WGSL has no f64), and `BatchNormalization` folded into a per-channel affine on the host, as inference runtimes
//! fold it.

use super::{bcast_strides, broadcast, contiguous, done, fits, host, Params, Row};
use crate::error::Result;
use crate::tensor::{DType, Tensor};
use crate::wgpu::ctx::{upload_float, Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("Identity", identity),
    Row::new("Dropout", identity),
    Row::new("Neg", unary),
    Row::new("Abs", unary),
    Row::new("Relu", unary),
    Row::new("Sigmoid", unary),
    Row::new("Tanh", unary),
    Row::new("Exp", unary),
    Row::new("Log", unary),
    Row::new("Sqrt", unary),
    Row::new("Reciprocal", unary),
    Row::new("LeakyRelu", unary),
    Row::new("Erf", unary),
    Row::new("Gelu", unary),
    Row::new("HardSigmoid", unary),
    Row::new("HardSwish", unary),
    Row::new("Clip", unary),
    Row::new("Softplus", unary),
    Row::new("Elu", unary),
    Row::new("Floor", unary),
    Row::new("Ceil", unary),
    Row::new("Round", unary),
    Row::new("Sin", unary),
    Row::new("Cos", unary),
    Row::new("Sign", unary),
    Row::new("Selu", unary),
    Row::new("Silu", unary),
    Row::new("Swish", unary),
    Row::new("Mish", unary),
    Row::new("ThresholdedRelu", unary),
    Row::new("Tan", unary),
    Row::new("Asin", unary),
    Row::new("Acos", unary),
    Row::new("Atan", unary),
    Row::new("Sinh", unary),
    Row::new("Cosh", unary),
    Row::new("Asinh", unary),
    Row::new("Acosh", unary),
    Row::new("Atanh", unary),
    Row::new("Softsign", unary),
    Row::new("Shrink", unary),
    Row::ml("Binarizer", unary),
    Row::new("Add", binary),
    Row::new("Sub", binary),
    Row::new("Mul", binary),
    Row::new("Div", binary),
    Row::new("Pow", binary),
    Row::new("Max", binary),
    Row::new("Min", binary),
    Row::new("Sum", binary),
    Row::new("Mean", binary),
    Row::new("PRelu", binary),
    Row::new("Mod", binary),
    Row::new("Where", where_),
    Row::new("Cast", cast),
    Row::new("CastLike", cast),
    Row::new("BatchNormalization", batchnorm),
];

fn unary_code(op: &str) -> Option<u32> {
    Some(match op {
        "Neg" => 1,
        "Abs" => 2,
        "Relu" => 3,
        "Sigmoid" => 4,
        "Tanh" => 5,
        "Exp" => 6,
        "Log" => 7,
        "Sqrt" => 8,
        "Reciprocal" => 9,
        "LeakyRelu" => 10,
        "Erf" => 11,
        "Gelu" => 12,
        "HardSigmoid" => 14,
        "HardSwish" => 15,
        "Clip" => 16,
        "Softplus" => 17,
        "Elu" => 20,
        "Floor" => 21,
        "Ceil" => 22,
        "Round" => 23,
        "Sin" => 24,
        "Cos" => 25,
        "Sign" => 26,
        "Selu" => 27,
        "Silu" => 28,
        "Swish" => 29,
        "Mish" => 30,
        "ThresholdedRelu" => 31,
        "Tan" => 34,
        "Asin" => 35,
        "Acos" => 36,
        "Atan" => 37,
        "Sinh" => 38,
        "Cosh" => 39,
        "Asinh" => 40,
        "Acosh" => 41,
        "Atanh" => 42,
        "Softsign" => 43,
        "Shrink" => 44,
        "Binarizer" => 45,
        _ => return None,
    })
}

/// Identity, and Dropout at inference: the input, and a mask of ones where asked for.
fn identity(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    if ctx.node.output.get(1).is_none_or(|o| o.is_empty()) {
        return Ok(Out::Dev(vec![x]));
    }
    let training = match ctx.has(2) {
        true => ctx.floats(2).map(|v| v.iter().any(|&t| t != 0.0)),
        false => Some(false),
    };
    if training != Some(false) {
        return host("Dropout in training mode (or a mode not known on the host): its random mask");
    }
    let mask = super::compare::all_true(ctx, &x)?;
    Ok(Out::Dev(vec![x, mask]))
}

/// Runs unary op `code` with `alpha`/`beta` on input 0.
/// Tensors beyond the binding limit run in chunks of the same range of input and output.
pub fn apply_unary(ctx: &mut Ctx, x: &DevVal, code: u32, alpha: f32, beta: f32) -> Result<DevVal> {
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let params = |_: usize, len: usize| {
        let mut p = Params::new();
        p.set(0, len as u32)
            .set(1, code)
            .set_f(2, alpha)
            .set_f(3, beta);
        p.0
    };
    ctx.run_chunked(
        "elementwise/unary",
        params,
        &[(&x.buf, true)],
        &out,
        x.len(),
    )?;
    Ok(out)
}

fn unary(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let mut code = unary_code(&op).expect("found");
    let x = ctx.dev(0)?;
    let big = if ctx.gpu.mode.is_f16() {
        65504.0
    } else {
        f32::MAX
    };
    let (a, b) = match op.as_str() {
        "LeakyRelu" => (ctx.attr_f("alpha", 0.01), 0.0),
        "HardSigmoid" => (ctx.attr_f("alpha", 0.2), ctx.attr_f("beta", 0.5)),
        "Elu" | "ThresholdedRelu" | "Swish" => (ctx.attr_f("alpha", 1.0), 0.0),
        "Shrink" => (ctx.attr_f("lambd", 0.5), ctx.attr_f("bias", 0.0)),
        "Binarizer" => (ctx.attr_f("threshold", 0.0), 0.0),
        "Selu" => (
            ctx.attr_f("alpha", 1.673_263_2),
            ctx.attr_f("gamma", 1.050_701),
        ),
        "Gelu" => {
            if ctx.attr_s("approximate", "none") == "tanh" {
                code = 13;
            }
            (0.0, 0.0)
        }
        "Clip" if ctx.opset < 11 => (ctx.attr_f("min", -big), ctx.attr_f("max", big)),
        "Clip" => {
            let lo = match ctx.has(1) {
                true => ctx.floats(1).and_then(|v| v.first().copied()),
                false => Some(-big as f64),
            };
            let hi = match ctx.has(2) {
                true => ctx.floats(2).and_then(|v| v.first().copied()),
                false => Some(big as f64),
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) => ((lo as f32).max(-big), (hi as f32).min(big)),
                _ => return host("Clip bounds computed on the device are read on the host"),
            }
        }
        _ => (0.0, 0.0),
    };
    let out = apply_unary(ctx, &x, code, a, b)?;
    done(ctx, out)
}

fn bin_code(op: &str) -> u32 {
    match op {
        "Sub" => 1,
        "Mul" => 2,
        "Div" => 3,
        "Pow" => 4,
        "Max" => 5,
        "Min" => 6,
        "PRelu" => 7,
        "Mod" => 8,
        _ => 0,
    }
}

/// Broadcasting `a op b`.
pub fn apply_binary(ctx: &mut Ctx, a: &DevVal, b: &DevVal, code: u32) -> Result<Option<DevVal>> {
    let Some(shape) = broadcast(&[&a.shape, &b.shape]) else {
        return Ok(None);
    };
    if !fits(&shape) {
        return Ok(None);
    }
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let n = out.len();
    // Beyond the binding limit, operands of the output's shape are chunked with it (the others bound whole).
    let (ca, cb) = (a.shape == shape, b.shape == shape);
    let params = |start: usize, len: usize| {
        let mut p = Params::new();
        p.set(0, len as u32)
            .set(1, shape.len() as u32)
            .set(2, code)
            .set(3, start as u32)
            .dims(4, &shape)
            .strides(12, &bcast_strides(&a.shape, &shape))
            .strides(20, &bcast_strides(&b.shape, &shape))
            .set(28, if ca { start as u32 } else { 0 })
            .set(29, if cb { start as u32 } else { 0 });
        p.0
    };
    let ins = [(&*a.buf, ca), (&*b.buf, cb)];
    ctx.run_chunked("elementwise/binary", params, &ins, &out, n)?;
    Ok(Some(out))
}

/// Whether input `i` is an integer tensor known on the host whose every value the device's float storage holds
/// exactly (|v| ≤ 2^24 in f32, ≤ 2048 in f16).
fn exact_on_device(ctx: &Ctx, i: usize) -> bool {
    let limit = if ctx.gpu.mode.is_f16() {
        2048.0
    } else {
        16_777_216.0
    };
    ctx.host(i)
        .is_some_and(|t| !t.dtype().is_float() && t.to_f64_array().iter().all(|v| v.abs() <= limit))
}

/// Integer input `i` uploaded as floats (exactly: see [`exact_on_device`]).
fn int_as_float(ctx: &mut Ctx, i: usize) -> Result<DevVal> {
    let t = ctx.host(i).and_then(|t| t.cast(DType::F32));
    let t = t.ok_or_else(|| crate::error::Error::Wgpu {
        reason: format!("{}: no value for input {i}", ctx.node.name),
    })?;
    let name = ctx.node.input[i].clone();
    upload_float(ctx.gpu, &t, &name, &mut ctx.store.out_of_range)
}

fn binary(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let n_in = ctx.node.input.len();
    // Pow's exponent may be an integer tensor: read as floats where the device's storage holds it exactly.
    let int_exponent_ok = op == "Pow" && ctx.is_float(0) && exact_on_device(ctx, 1);
    if (0..n_in).any(|i| !ctx.is_float(i)) && !int_exponent_ok {
        return host(format!("{op} with integer operands has no shader path"));
    }
    if op == "Mod" && ctx.attr_i("fmod", 0) != 1 {
        return host("Mod on floats needs fmod=1");
    }
    let code = bin_code(&op);
    let mut acc = ctx.dev(0)?;
    if n_in == 1 {
        return Ok(Out::Dev(vec![acc]));
    }
    for i in 1..n_in {
        let b = match int_exponent_ok {
            true => int_as_float(ctx, i)?,
            false => ctx.dev(i)?,
        };
        match apply_binary(ctx, &acc, &b, code)? {
            Some(v) => acc = v,
            None => return host(format!("{op}: shapes that do not broadcast")),
        }
    }
    if op == "Mean" {
        acc = apply_unary(ctx, &acc, 33, 1.0 / n_in as f32, 0.0)?;
    }
    done(ctx, acc)
}

fn where_(ctx: &mut Ctx) -> Result<Out> {
    let (Some(sc), Some(sa), Some(sb)) = (ctx.shape(0), ctx.shape(1), ctx.shape(2)) else {
        return host("Where: missing input");
    };
    let Some(shape) = broadcast(&[&sc, &sa, &sb]).filter(|s| fits(s)) else {
        return host("Where: shapes that do not broadcast");
    };
    if !ctx.is_float(2) {
        return host("Where on integer values runs on the host");
    }
    let c = ctx.dev_words(0)?;
    let a = ctx.dev(1)?;
    let b = ctx.dev(2)?;
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, shape.len() as u32)
        .dims(4, &shape)
        .strides(12, &bcast_strides(&sc, &shape))
        .strides(20, &bcast_strides(&sa, &shape))
        .strides(28, &bcast_strides(&sb, &shape));
    ctx.run(
        "elementwise/where",
        "main",
        &p.0,
        &[Some(&c), Some(&a.buf), Some(&b.buf)],
        &out,
        n,
    )?;
    done(ctx, out)
}

fn cast(ctx: &mut Ctx) -> Result<Out> {
    let to = match ctx.node.op_type.as_str() {
        "CastLike" => match ctx.dtype(1) {
            Some(d) => d,
            None => return host("CastLike: the target type's input is missing"),
        },
        _ => DType::from_onnx(ctx.attr_i("to", 1) as i32),
    };
    // WGSL has no f64: a double is held in f32 on the device, as every f64 value of the run is (the report gives
    // such values as f32, judged at f32's tolerance).
    let to = if to == DType::F64 { DType::F32 } else { to };
    if !ctx.is_float(0) {
        return cast_integers(ctx, to);
    }
    if !matches!(to, DType::F32 | DType::F16 | DType::Bf16) {
        return host(format!("host: Cast to {to} runs on the host"));
    }
    let x = ctx.dev(0)?;
    if ctx.gpu.mode.is_f16() {
        return Ok(Out::Dev(vec![x]));
    }
    let v = DevVal { dtype: to, ..x };
    done(ctx, v)
}

/// Integers (sizes from shape arithmetic, held on the host) cast to a float: their exact values uploaded, rounded
/// once to the device's storage type as a Cast rounds them. Integer targets stay on the host.
fn cast_integers(ctx: &mut Ctx, to: DType) -> Result<Out> {
    let op = &ctx.node.op_type;
    let Some(t) = ctx
        .host(0)
        .filter(|_| matches!(to, DType::F32 | DType::F16))
    else {
        return host(format!(
            "{op} of integer values: integer arithmetic runs on the host"
        ));
    };
    let exact = Tensor::F64(t.to_f64_array());
    let name = ctx.node.output[0].clone();
    let v = upload_float(ctx.gpu, &exact, &name, &mut ctx.store.out_of_range)?;
    match ctx.gpu.mode.is_f16() {
        true => Ok(Out::Dev(vec![v])),
        false => done(ctx, DevVal { dtype: to, ..v }),
    }
}

fn batchnorm(ctx: &mut Ctx) -> Result<Out> {
    if ctx.attr_i("training_mode", 0) != 0 || ctx.node.output.len() > 1 {
        return host("BatchNormalization in training mode");
    }
    let Some(shape) = ctx.shape(0) else {
        return host("BatchNormalization: no input shape");
    };
    let vals: Option<Vec<Vec<f64>>> = (1..5).map(|i| ctx.floats(i)).collect();
    let Some(v) = vals else {
        return host("BatchNormalization parameters computed on the device");
    };
    let eps = ctx.attr_f("epsilon", 1e-5) as f64;
    // Parameters as the device stores them (f16 in f16 mode), folded in f32 like a runtime's constant folding.
    let f16 = ctx.gpu.mode.is_f16();
    let st = |x: f64| -> f32 {
        match f16 {
            true => crate::tensor::narrow::f16_of(x).to_f32(),
            false => x as f32,
        }
    };
    if f16 {
        for (k, vals) in v.iter().enumerate() {
            let name = ctx.node.input[k + 1].clone();
            let found = crate::precision::convert::range_issues(
                &name,
                vals.iter().copied(),
                crate::precision::LowPrecision::F16,
            );
            ctx.store.out_of_range.extend(found);
        }
    }
    let c = v[0].len();
    if shape.len() < 2 || shape[1] != c || v.iter().any(|p| p.len() != c) {
        return host("BatchNormalization with unusual parameter shapes");
    }
    let mut a = vec![0f32; c];
    let mut b = vec![0f32; c];
    for k in 0..c {
        let s = st(v[0][k]) / (st(v[3][k]) + st(eps)).sqrt();
        a[k] = s;
        b[k] = st(v[1][k]) - st(v[2][k]) * s;
    }
    let arr =
        |d: Vec<f32>| Tensor::F32(ndarray::ArrayD::from_shape_vec(vec![c], d).expect("sized"));
    let name = ctx.node.name.clone();
    let gpu = ctx.gpu;
    let da = crate::wgpu::ctx::upload_float(gpu, &arr(a), &name, &mut vec![])?;
    let db = crate::wgpu::ctx::upload_float(gpu, &arr(b), &name, &mut vec![])?;
    let x = ctx.dev(0)?;
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let n = out.len();
    let inner: usize = shape[2..].iter().product();
    let mut p = Params::new();
    p.set(0, n as u32).set(1, inner as u32).set(2, c as u32);
    ctx.run(
        "reduce/norm",
        "affine",
        &p.0,
        &[Some(&x.buf), Some(&da.buf), Some(&db.buf)],
        &out,
        n,
    )?;
    let _ = contiguous;
    done(ctx, out)
}
