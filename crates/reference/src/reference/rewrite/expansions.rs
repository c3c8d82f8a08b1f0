//! The ops [`super`] expands into ONNX ops tract computes in f64 (where tract's own expansion of the op does not
//! compute in f64, or does not take its input form): one row each, an expansion per row. Adding one is a row and a
//! function.

use super::{attr, crop_negative_pads, Builder};

/// Writes the nodes computing `y` from `x` for the builder's node; false where the expansion does not apply.
pub(super) type Expand = fn(&mut Builder<'_>, &str, &str) -> bool;

/// The ops expanded into ONNX ops tract computes in f64, one row each.
pub(super) const EXPANSIONS: &[(&str, Expand)] = &[
    ("Gelu", gelu),
    ("Pad", pad),
    ("Swish", swish),
    ("IsNaN", is_nan),
    ("IsInf", is_inf),
];

/// `Gelu`: x · (1 + erf(x / √2)) / 2, or its tanh approximation.
fn gelu(b: &mut Builder<'_>, x: &str, y: &str) -> bool {
    let tanh = attr(b.node, "approximate").is_some_and(|a| a.s == b"tanh");
    let (one, half) = (b.constant(1.0), b.constant(0.5));
    let core = if tanh {
        let c = b.constant(0.044715);
        let k = b.constant((2.0 / std::f64::consts::PI).sqrt());
        let x2 = b.op("Mul", &[x, x], None);
        let x3 = b.op("Mul", &[&x2, x], None);
        let cx3 = b.op("Mul", &[&x3, &c], None);
        let inner = b.op("Add", &[x, &cx3], None);
        let scaled = b.op("Mul", &[&inner, &k], None);
        b.op("Tanh", &[&scaled], None)
    } else {
        let k = b.constant(std::f64::consts::FRAC_1_SQRT_2);
        let scaled = b.op("Mul", &[x, &k], None);
        b.op("Erf", &[&scaled], None)
    };
    let plus = b.op("Add", &[&core, &one], None);
    let prod = b.op("Mul", &[x, &plus], None);
    b.op("Mul", &[&prod, &half], Some(y));
    true
}

/// `Pad` with its pads as an input: negative pads cropped ([`crop_negative_pads`]).
fn pad(b: &mut Builder<'_>, _: &str, y: &str) -> bool {
    if b.node.input.len() < 2 {
        return false;
    }
    crop_negative_pads(b, y);
    true
}

/// `Swish`: x · sigmoid(alpha · x).
fn swish(b: &mut Builder<'_>, x: &str, y: &str) -> bool {
    let alpha = attr(b.node, "alpha").map(|a| a.f as f64).unwrap_or(1.0);
    let a = b.constant(alpha);
    let ax = b.op("Mul", &[x, &a], None);
    let s = b.op("Sigmoid", &[&ax], None);
    b.op("Mul", &[x, &s], Some(y));
    true
}

/// `IsNaN`: not (x = x).
fn is_nan(b: &mut Builder<'_>, x: &str, y: &str) -> bool {
    let same = b.op("Equal", &[x, x], None);
    b.op("Not", &[&same], Some(y));
    true
}

/// `IsInf`: x equal to the infinities it detects.
fn is_inf(b: &mut Builder<'_>, x: &str, y: &str) -> bool {
    let n = b.node;
    let flag = |name: &str| attr(n, name).is_none_or(|a| a.i != 0);
    let mut hits = vec![];
    for (on, v) in [
        (flag("detect_positive"), f64::INFINITY),
        (flag("detect_negative"), f64::NEG_INFINITY),
    ] {
        if on {
            let c = b.constant(v);
            hits.push(b.op("Equal", &[x, &c], None));
        }
    }
    match hits.as_slice() {
        [one] => b.op("Identity", &[one], Some(y)),
        [p, q] => b.op("Or", &[p, q], Some(y)),
        _ => {
            let same = b.op("Equal", &[x, x], None);
            b.op("Xor", &[&same, &same], Some(y))
        }
    };
    true
}

#[cfg(test)]
mod tests {
    use tract_onnx::pb::NodeProto;

    #[test]
    fn each_op_is_in_one_row_and_expands() {
        for (op, _) in super::EXPANSIONS {
            let rows = super::EXPANSIONS.iter().filter(|(o, _)| o == op).count();
            assert_eq!(rows, 1, "{op}");
            let n = NodeProto {
                name: "n".into(),
                op_type: op.to_string(),
                input: vec!["x".into(), "pads".into()],
                output: vec!["y".into()],
                ..Default::default()
            };
            let (nodes, _) = super::super::replace(&n).unwrap_or_else(|| panic!("{op}"));
            assert!(nodes.iter().any(|m| m.output == ["y"]), "{op}");
        }
    }
}
