//! The fast kernels against tract's own f64 evaluation of the same op, on randomized shapes, at rtol 1e-12.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::axes::AxesMapping;
use tract_onnx::tract_core::ops::cnn::{Conv, Deconv, KernelFormat, PaddingSpec, PoolSpec};
use tract_onnx::tract_core::ops::einsum::EinSum;
use tract_onnx::tract_core::ops::nn::DataFormat;

const RTOL: f64 = 1e-12;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn upto(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn tensor(&mut self, shape: &[usize]) -> Tensor {
        let len = shape.iter().product();
        let v: Vec<f64> = (0..len)
            .map(|_| (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect();
        Tensor::from_shape(shape, &v).unwrap()
    }
}

/// A one-node model of `op` over sources shaped like `ins`, and phantom's result for that node.
fn ours(op: Box<dyn TypedOp>, ins: Vec<Tensor>) -> (TypedModel, TVec<TValue>, Tensor) {
    let mut model = TypedModel::default();
    let wires: TVec<OutletId> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| {
            model
                .add_source(format!("i{i}"), TypedFact::shape_and_dt_of(t))
                .unwrap()
        })
        .collect();
    let out = model.wire_node("op", op, &wires).unwrap();
    model.select_output_outlets(&out).unwrap();
    let values: TVec<TValue> = ins.into_iter().map(|t| t.into_tvalue()).collect();
    let node = model.node(out[0].node).clone();
    let mut owned = values.clone();
    let result = super::eval(&node, &values)
        .or_else(|| super::eval_binary(&node, &mut owned))
        .expect("the fast kernel takes this op")
        .unwrap();
    (model, values, result[0].clone().into_tensor())
}

/// tract's own result (the one-node model run by tract, never through phantom's hook) and phantom's.
fn both(op: Box<dyn TypedOp>, ins: Vec<Tensor>) -> (Tensor, Tensor) {
    let (model, values, ours) = ours(op, ins);
    let theirs = model.into_runnable().unwrap().run(values).unwrap();
    (theirs[0].clone().into_tensor(), ours)
}

fn assert_close(theirs: &Tensor, ours: &Tensor, what: &str) {
    assert_eq!(theirs.shape(), ours.shape(), "{what}");
    let (t, o) = (
        theirs.try_as_plain_ram().unwrap(),
        ours.try_as_plain_ram().unwrap(),
    );
    let (t, o) = (t.as_slice::<f64>().unwrap(), o.as_slice::<f64>().unwrap());
    let scale = t.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in t.iter().zip(o).enumerate() {
        assert!(
            (a - b).abs() <= RTOL * a.abs().max(scale * 1e-3),
            "{what}: element {i}: tract {a} vs phantom {b}"
        );
    }
}

/// Random x [batch, C_in, *hw], kernel [C_out, C_in/group, *kernel] and bias (per channel, or none): the
/// operands and x's shape.
fn operands(
    g: &mut Gen,
    [batch, c_in, c_out, cg]: [usize; 4],
    kernel: &[usize],
    hw: &[usize],
    bias: bool,
) -> (Vec<Tensor>, Vec<usize>) {
    let x: Vec<usize> = [batch, c_in]
        .into_iter()
        .chain(hw.iter().copied())
        .collect();
    let w: Vec<usize> = [c_out, cg]
        .into_iter()
        .chain(kernel.iter().copied())
        .collect();
    let b = if bias {
        g.tensor(&[c_out])
    } else {
        g.tensor(&[])
    };
    (vec![g.tensor(&x), g.tensor(&w), b], x)
}

/// An NCHW pool spec with explicit pads.
fn pool(
    kernel: TVec<usize>,
    dil: TVec<usize>,
    strides: TVec<usize>,
    (before, after): (TVec<usize>, TVec<usize>),
    (c_in, c_out): (usize, usize),
) -> PoolSpec {
    PoolSpec {
        data_format: DataFormat::NCHW,
        kernel_shape: kernel,
        padding: PaddingSpec::Explicit(before, after),
        dilations: Some(dil),
        strides: Some(strides),
        input_channels: c_in,
        output_channels: c_out,
    }
}

#[test]
fn conv_matches_tract_f64_on_random_shapes() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for case in 0..60 {
        let rank = 1 + case % 3;
        let group = [1, 1, 2, 3][g.upto(4)];
        let depthwise = case % 5 == 4;
        let (cg, og) = if depthwise {
            (1, 1)
        } else {
            (1 + g.upto(4), 1 + g.upto(4))
        };
        let kernel: TVec<usize> = (0..rank).map(|_| 1 + g.upto(3)).collect();
        let dil: TVec<usize> = (0..rank).map(|_| 1 + g.upto(2)).collect();
        let strides: TVec<usize> = (0..rank).map(|_| 1 + g.upto(2)).collect();
        let before: TVec<usize> = (0..rank).map(|_| g.upto(2)).collect();
        let after: TVec<usize> = (0..rank).map(|_| g.upto(2)).collect();
        let side = if rank == 3 { 5 } else { 9 };
        let hw: Vec<usize> = (0..rank)
            .map(|i| kernel[i] * dil[i] + g.upto(side))
            .collect();
        let (c_in, c_out) = (cg * group, og * group);
        let batch = 1 + g.upto(2);
        let (ins, x) = operands(
            &mut g,
            [batch, c_in, c_out, cg],
            &kernel,
            &hw,
            case % 2 == 0,
        );
        let conv = Conv {
            pool_spec: pool(kernel, dil, strides, (before, after), (c_in, c_out)),
            kernel_fmt: KernelFormat::OIHW,
            group,
            q_params: None,
        };
        let what = format!("case {case}: {conv:?} x {x:?}");
        let (theirs, ours) = both(Box::new(conv), ins);
        assert_close(&theirs, &ours, &what);
    }
}

#[test]
fn conv_transpose_matches_tract_f64_on_random_shapes() {
    let mut g = Gen(7);
    for case in 0..40 {
        let rank = 1 + case % 3;
        let group = [1, 1, 2][g.upto(3)];
        let (cg, og) = (1 + g.upto(3), 1 + g.upto(3));
        let kernel: TVec<usize> = (0..rank).map(|_| 1 + g.upto(3)).collect();
        let dil: TVec<usize> = (0..rank).map(|_| 1 + g.upto(2)).collect();
        let strides: TVec<usize> = (0..rank).map(|_| 1 + g.upto(3)).collect();
        let before: TVec<usize> = (0..rank).map(|i| g.upto(kernel[i])).collect();
        let after: TVec<usize> = (0..rank).map(|i| g.upto(kernel[i])).collect();
        let adjustments: TVec<usize> = (0..rank).map(|i| g.upto(strides[i].min(dil[i]))).collect();
        let hw: Vec<usize> = (0..rank)
            .map(|_| 1 + g.upto(if rank == 3 { 4 } else { 7 }))
            .collect();
        let (c_in, c_out) = (cg * group, og * group);
        let batch = 1 + g.upto(2);
        let (ins, x) = operands(
            &mut g,
            [batch, c_in, c_out, cg],
            &kernel,
            &hw,
            case % 2 == 0,
        );
        let pool_spec = pool(kernel, dil, strides, (before, after), (c_in, c_out));
        let op = Deconv::new(pool_spec, KernelFormat::OIHW, adjustments, group);
        let what = format!("case {case}: {op:?} x {x:?}");
        let (theirs, ours) = both(Box::new(op), ins);
        assert_close(&theirs, &ours, &what);
    }
}

#[test]
fn contractions_match_tract_f64_on_random_shapes() {
    let exprs = [
        "mk,kn->mn",
        "mk,nk->mn",
        "km,kn->mn",
        "bmk,bkn->bmn",
        "bhmk,bhnk->bhmn",
        "bmk,kn->bmn",
        "k,kn->n",
        "bmk,k->bm",
        "mk,bkn->bnm",
    ];
    let mut g = Gen(42);
    for (i, expr) in exprs.iter().cycle().take(45).enumerate() {
        let axes: AxesMapping = expr.parse().unwrap();
        let mut size = std::collections::HashMap::new();
        for c in expr.chars().filter(|c| c.is_alphabetic()) {
            size.entry(c)
                .or_insert_with(|| 1 + g.upto(if i < 9 { 7 } else { 70 }));
        }
        let (lhs, _) = expr.split_once("->").unwrap();
        let (sa, sb) = lhs.split_once(',').unwrap();
        let shape = |s: &str| s.chars().map(|c| size[&c]).collect::<Vec<_>>();
        let ins = vec![g.tensor(&shape(sa)), g.tensor(&shape(sb))];
        let op = EinSum::new(axes, f64::datum_type());
        let (theirs, ours) = both(Box::new(op), ins);
        assert_close(&theirs, &ours, &format!("{expr} with {size:?}"));
    }
}

/// Attention has no f64 path in tract (it falls back to f32): checked against the definition, written as loops.
#[test]
fn attention_matches_its_definition_in_f64() {
    use tract_transformers::ops::sdpa::Sdpa;
    let mut g = Gen(99);
    for case in 0..24 {
        let (b, kvh, group, m, n, dk, dv) = (
            1 + g.upto(2),
            1 + g.upto(2),
            1 + g.upto(3),
            1 + g.upto(6),
            1 + g.upto(9),
            1 + g.upto(8),
            1 + g.upto(8),
        );
        let (m, hq) = (m.min(n), kvh * group);
        let causal = case % 3 == 1;
        let masked = case % 3 == 2;
        let q = g.tensor(&[b, hq, m, dk]);
        let k = g.tensor(&[b, kvh, n, dk]);
        let v = g.tensor(&[b, kvh, n, dv]);
        let mask = g.tensor(&[1, hq, m, n]);
        let mut ins = vec![q.clone(), k.clone(), v.clone()];
        if masked {
            ins.push(mask.clone());
        }
        let op = Sdpa {
            scale: None,
            datum_type: f64::datum_type(),
            acc_datum_type: f64::datum_type(),
            is_causal: causal,
        };
        let (_, _, ours) = ours(Box::new(op), ins);
        let view = |t: &Tensor| t.to_plain_array_view::<f64>().unwrap().into_owned();
        let (q, k, v, mask) = (view(&q), view(&k), view(&v), view(&mask));
        let mut want = vec![];
        for bi in 0..b {
            for h in 0..hq {
                for i in 0..m {
                    let mut s: Vec<f64> = (0..n)
                        .map(|j| {
                            let dot: f64 = (0..dk)
                                .map(|c| q[[bi, h, i, c]] * k[[bi, h / group, j, c]])
                                .sum();
                            let add = if masked {
                                mask[[0, h, i, j]]
                            } else if causal && j > i + n - m {
                                f64::MIN
                            } else {
                                0.0
                            };
                            dot / (dk as f64).sqrt() + add
                        })
                        .collect();
                    let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    s.iter_mut().for_each(|x| *x = (*x - max).exp());
                    let sum: f64 = s.iter().sum();
                    for c in 0..dv {
                        want.push(
                            (0..n)
                                .map(|j| s[j] / sum * v[[bi, h / group, j, c]])
                                .sum::<f64>(),
                        );
                    }
                }
            }
        }
        let want = Tensor::from_shape(&[b, hq, m, dv], &want).unwrap();
        assert_close(
            &want,
            &ours,
            &format!("case {case}: b{b} hq{hq} kvh{kvh} m{m} n{n}"),
        );
    }
}

/// Element-wise arithmetic: bit-identical to tract on every broadcast form (±0 included, NaN where tract propagates
/// it), and tract keeps values too small to split, except Min and Max, which propagate NaN at any size.
#[test]
fn binary_ops_match_tract_bit_for_bit() {
    use tract_onnx::tract_core::ops::binary::TypedBinOp;
    use tract_onnx::tract_core::ops::math;
    let mut g = Gen(11);
    type Make = fn() -> TypedBinOp;
    let ops: [(&str, Make); 7] = [
        ("add", math::add),
        ("sub", math::sub),
        ("subf", math::subf),
        ("mul", math::mul),
        ("div", math::div),
        ("min", math::min),
        ("max", math::max),
    ];
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[1, 8, 64, 80], &[1, 8, 64, 80]),
        (&[1, 8, 64, 80], &[1, 8, 1, 1]),
        (&[1, 1, 1, 1], &[2, 8, 64, 40]),
        (&[4, 1, 96, 100], &[1, 3, 96, 1]),
        (&[40000, 3], &[1, 3]),
        (&[3, 1, 200], &[3, 200, 1]),
    ];
    for (name, op) in &ops {
        for (sa, sb) in shapes {
            let (mut a, b) = (g.tensor(sa), g.tensor(sb));
            {
                let mut p = a.try_as_plain_ram_mut().unwrap();
                let s = p.as_slice_mut::<f64>().unwrap();
                // NaN only where tract and phantom agree: Min and Max propagate it, tract's drop it.
                if !matches!(*name, "min" | "max") {
                    s[0] = f64::NAN;
                }
                s[s.len() - 1] = -0.0;
            }
            // Operands only the node holds: the one shaped like the output is written in place.
            let mut exclusive: TVec<TValue> =
                tvec![a.clone().into_tvalue(), b.clone().into_tvalue()];
            let in_place = super::binary::binary_node(&op(), &mut exclusive)
                .unwrap()
                .unwrap();
            let (theirs, ours) = both(Box::new(op()), vec![a, b]);
            for ours in [ours, in_place[0].clone().into_tensor()] {
                assert_eq!(theirs.shape(), ours.shape(), "{name} {sa:?} {sb:?}");
                let (t, o) = (
                    theirs.try_as_plain_ram().unwrap(),
                    ours.try_as_plain_ram().unwrap(),
                );
                let (t, o) = (t.as_slice::<f64>().unwrap(), o.as_slice::<f64>().unwrap());
                let differ = t
                    .iter()
                    .zip(o)
                    .position(|(x, y)| x.to_bits() != y.to_bits());
                assert_eq!(differ, None, "{name} {sa:?} {sb:?}");
            }
        }
    }
    let small = [g.tensor(&[2, 100]), g.tensor(&[2, 100])];
    let mut node_ins: TVec<TValue> = small.into_iter().map(|t| t.into_tvalue()).collect();
    assert!(super::binary::binary_node(&math::add(), &mut node_ins).is_none());
    // Min and Max are phantom's at any size, and NaN in either operand gives NaN.
    let (nan, one) = (tensor1(&[f64::NAN, 1.0]), tensor1(&[2.0, f64::NAN]));
    for op in [math::min(), math::max()] {
        let mut ins: TVec<TValue> = tvec![nan.clone().into_tvalue(), one.clone().into_tvalue()];
        let out = super::binary::binary_node(&op, &mut ins).unwrap().unwrap();
        let v = out[0].to_plain_array_view::<f64>().unwrap();
        assert!(v.iter().all(|x| x.is_nan()), "{v:?}");
    }
}

/// Adjacent axes merge where both operands allow; the inner axis is contiguous or broadcast in each.
#[test]
fn binary_layout_merges_axes() {
    let l = super::binary::Layout::of(&[1, 8, 64, 80], &[1, 8, 1, 1]).unwrap();
    assert_eq!(
        (l.dims.clone(), l.strides.clone()),
        (vec![8, 5120], [vec![5120, 1], vec![1, 0]])
    );
    let l = super::binary::Layout::of(&[2, 3, 4], &[2, 3, 4]).unwrap();
    assert_eq!((l.dims.clone(), l.len), (vec![24], 24));
    let l = super::binary::Layout::of(&[1, 1], &[1, 1]).unwrap();
    assert_eq!(l.dims, vec![1]);
    assert!(super::binary::Layout::of(&[2, 3], &[3, 3]).is_none());
    assert!(super::binary::Layout::of(&[2, 3], &[3]).is_none());
}

/// Random integer codes of `dt` (u8 or i8) shaped `shape`.
fn codes(g: &mut Gen, shape: &[usize], dt: DatumType) -> Tensor {
    let len = shape.iter().product();
    let v: Vec<i32> = (0..len).map(|_| (g.next() % 256) as i32).collect();
    let t = Tensor::from_shape(shape, &v).unwrap();
    let t = if dt == DatumType::I8 {
        let shifted: Vec<i32> = v.iter().map(|c| c - 128).collect();
        Tensor::from_shape(shape, &shifted).unwrap()
    } else {
        t
    };
    t.cast_to_dt(dt).unwrap().into_owned()
}

#[test]
fn conv_integer_matches_tract_exactly_on_random_shapes() {
    let mut g = Gen(0x5eed);
    for case in 0..40 {
        let rank = 1 + case % 3;
        let group = [1, 1, 2][g.upto(3)];
        let (cg, og) = (1 + g.upto(4), 1 + g.upto(4));
        let kernel: TVec<usize> = (0..rank).map(|_| 1 + g.upto(3)).collect();
        let dil: TVec<usize> = (0..rank).map(|_| 1 + g.upto(2)).collect();
        let strides: TVec<usize> = (0..rank).map(|_| 1 + g.upto(2)).collect();
        let before: TVec<usize> = (0..rank).map(|_| g.upto(2)).collect();
        let after: TVec<usize> = (0..rank).map(|_| g.upto(2)).collect();
        let side = if rank == 3 { 5 } else { 9 };
        let hw: Vec<usize> = (0..rank)
            .map(|i| kernel[i] * dil[i] + g.upto(side))
            .collect();
        let (c_in, c_out) = (cg * group, og * group);
        let batch = 1 + g.upto(2);
        let x: Vec<usize> = [batch, c_in].into_iter().chain(hw).collect();
        let w: Vec<usize> = [c_out, cg]
            .into_iter()
            .chain(kernel.iter().copied())
            .collect();
        let (xdt, wdt) = [
            (DatumType::U8, DatumType::U8),
            (DatumType::U8, DatumType::I8),
            (DatumType::I8, DatumType::I8),
        ][case % 3];
        let int = |v: i32| tensor0(v);
        let one = || tensor0(1f32);
        let bias = if case % 2 == 0 {
            let b: Vec<i32> = (0..c_out).map(|_| g.upto(20001) as i32 - 10000).collect();
            tensor1(&b)
        } else {
            int(0)
        };
        let w_shift = if wdt == DatumType::I8 { 128 } else { 0 };
        let w_zero = if case % 4 == 3 {
            let z: Vec<i32> = (0..c_out).map(|_| g.upto(256) as i32 - w_shift).collect();
            tensor1(&z)
        } else {
            int(g.upto(256) as i32 - w_shift)
        };
        let ins = vec![
            codes(&mut g, &x, xdt),
            codes(&mut g, &w, wdt),
            bias,
            int(g.upto(256) as i32 - if xdt == DatumType::I8 { 128 } else { 0 }),
            one(),
            w_zero,
            one(),
            int(0),
            one(),
        ];
        let conv = Conv {
            pool_spec: pool(kernel, dil, strides, (before, after), (c_in, c_out)),
            kernel_fmt: KernelFormat::OIHW,
            group,
            q_params: Some(DatumType::I32),
        };
        let what = format!("case {case}: {conv:?} x {x:?} {xdt:?}·{wdt:?}");
        let (theirs, ours) = both(Box::new(conv), ins);
        assert_eq!(theirs, ours, "{what}");
        assert_eq!(ours.datum_type(), DatumType::I32, "{what}");
    }
}
