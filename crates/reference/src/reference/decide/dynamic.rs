//! DynamicQuantizeLinear reconciled with the target's decisions: the zero point first (its pre-rounding value
//! −min(x, 0) / scale, moved by the noise of the minimum), then the codes recomputed with the zero point taken and
//! reconciled element by element (x / scale moved by twice each element's noise: the scale comes from the input's
//! extremes, themselves within noise). The codes go in one pass over the u8 codes and the f64 input, read in place:
//! a 1024² feature map is tens of millions of codes, and the input's noise is only computed where the two differ.

use std::borrow::Cow;

use tract_onnx::prelude::*;

use super::{f64s, rms, settle, target_f64s, Adopted, Decision, Decisions, LADDER};

/// Reconciles a DynamicQuantizeLinear (outputs `outputs`: codes, scale, zero point) with the target's zero point and
/// codes, where it exposed them. Returns what was adopted, by value name.
pub fn adopt_dynamic(
    d: &Decisions,
    (names, outputs): (&[(usize, String)], &[String]),
    ins: &TVec<TValue>,
    out: &mut TVec<TValue>,
) -> Vec<(String, Adopted)> {
    let slot = |k: usize| {
        let want = outputs.get(k)?;
        names.iter().find(|(_, n)| n == want).map(|(s, _)| *s)
    };
    let (Some(ys), Some(ss), Some(zs)) = (slot(0), slot(1), slot(2)) else {
        return vec![];
    };
    let first = |v: &TValue| f64s(v).and_then(|v| v.first().copied());
    let (Some(x), Some(ours), Some(scale), Some(zp)) = (
        ins.first().and_then(floats),
        codes_of(&out[ys]),
        first(&out[ss]),
        first(&out[zs]),
    ) else {
        return vec![];
    };
    let y = d.get(&outputs[0]).map(|dec| (dec, ours.as_ref()));
    let (taken, zp_adopted, codes) = reconcile(&x, (scale, zp), d.get(&outputs[2]), y);
    let mut found = vec![];
    if let (Some(a), Ok(t)) = (zp_adopted, super::shaped_like(&out[zs], vec![taken])) {
        out[zs] = t;
        found.push((outputs[2].clone(), a));
    }
    match codes {
        Some((changed, a)) => {
            let written = changed.map(|v| coded_like(&out[ys], v));
            match written {
                Some(Ok(t)) => out[ys] = t,
                Some(Err(_)) => return found,
                None => {}
            }
            found.push((outputs[0].clone(), a));
        }
        None if d.contains_key(&outputs[0]) => found.push((outputs[0].clone(), Adopted::default())),
        None => {}
    }
    found
}

/// A value's elements in place, when it holds `T`.
fn in_place<T: Datum>(v: &TValue) -> Option<&[T]> {
    (v.datum_type() == T::datum_type())
        .then(|| v.to_plain_array_view::<T>().ok()?.to_slice())
        .flatten()
}

/// A value's elements as f64: in place when it holds f64.
fn floats(v: &TValue) -> Option<Cow<'_, [f64]>> {
    (in_place(v).map(Cow::Borrowed)).or_else(|| f64s(v).map(Cow::Owned))
}

/// A value's elements as codes (0–255): in place when it holds u8.
fn codes_of(v: &TValue) -> Option<Cow<'_, [u8]>> {
    (in_place(v).map(Cow::Borrowed))
        .or_else(|| f64s(v).map(|f| Cow::Owned(f.iter().map(|&c| c as u8).collect())))
}

/// The target's codes: in place when they are u8 in memory; none when they cannot be read.
fn target_codes(d: &Decision) -> Cow<'_, [u8]> {
    use crate::tensor::Tensor;
    match d.target() {
        Some(Cow::Borrowed(Tensor::U8(a))) if a.is_standard_layout() => {
            Cow::Borrowed(a.as_slice().expect("standard layout"))
        }
        Some(Cow::Owned(Tensor::U8(a))) if a.is_standard_layout() => {
            Cow::Owned(a.into_raw_vec_and_offset().0)
        }
        Some(t) => Cow::Owned(t.to_f64_array().iter().map(|&c| c as u8).collect()),
        None => Cow::Owned(vec![]),
    }
}

/// `codes` shaped like `like` and in its element type.
fn coded_like(like: &TValue, codes: Vec<u8>) -> TractResult<TValue> {
    let t = tract_ndarray::ArrayD::from_shape_vec(like.shape(), codes)?.into_tensor();
    Ok(t.cast_to_dt(like.datum_type())?.into_owned().into_tvalue())
}

/// A DynamicQuantizeLinear reconciled: the zero point taken, what was adopted of it, and the codes (the new codes
/// when any changed) with what was adopted of them, when the target's were judged.
type Reconciled = (f64, Option<Adopted>, Option<(Option<Vec<u8>>, Adopted)>);

/// Reconciles input `x`'s quantization (the reference's scale and zero point) with the target's zero point `zp`
/// and codes `y` (with the reference's codes).
fn reconcile(
    x: &[f64],
    (scale, zp_ours): (f64, f64),
    zp: Option<&Decision>,
    y: Option<(&Decision, &[u8])>,
) -> Reconciled {
    let (taken, zp_adopted) = match zp {
        Some(d) => {
            let (taken, a) = zero_point(x, scale, zp_ours, d);
            (taken, Some(a))
        }
        None => (zp_ours, None),
    };
    let codes =
        y.and_then(|(d, ours)| codes(x, scale, (zp_ours, taken), ours, &target_codes(d), d));
    (taken, zp_adopted, codes)
}

/// The zero point taken and what was adopted of it: the target's where −min(x, 0) / scale, moved by the noise of
/// the minimum, rounds to it.
fn zero_point(x: &[f64], scale: f64, zp_ours: f64, d: &Decision) -> (f64, Adopted) {
    let lo = x.iter().copied().fold(0.0f64, f64::min);
    let r_lo = d.noise_atol() + d.rtol * lo.abs().max(rms(x));
    let level = |v: f64| v.round_ties_even().clamp(0.0, 255.0);
    let zp0 = -lo / scale;
    let theirs = target_f64s(d).first().copied().unwrap_or(zp_ours);
    let bounds = |f: f64| {
        let at = |s: f64| vec![level(zp0 + s * f * r_lo / scale)];
        Some((at(-1.0), at(1.0)))
    };
    match settle(&[zp_ours], &[theirs], bounds, |_| false) {
        Some((v, a)) => (v[0], a),
        None => (zp_ours, Adopted::default()),
    }
}

/// The codes reconciled in one pass: the reference's `ours` (recomputed when the zero point taken is not its own)
/// against the target's `theirs`, each element that differs taken where x / scale, moved by up to twice its noise
/// (the [`LADDER`]'s fractions in turn), rounds to the target's code across one boundary. `None` when nothing
/// differs and the zero point is the reference's; the new codes only when some changed.
fn codes(
    x: &[f64],
    scale: f64,
    (zp_ours, zp_taken): (f64, f64),
    ours: &[u8],
    theirs: &[u8],
    d: &Decision,
) -> Option<(Option<Vec<u8>>, Adopted)> {
    if theirs.len() != ours.len() || x.len() != ours.len() {
        return None;
    }
    let code = |v: f64| (v.round_ties_even() + zp_taken).clamp(0.0, 255.0);
    let recode = zp_taken != zp_ours;
    let mut a = Adopted::default();
    let mut differs = false;
    let mut spread: Option<f64> = None;
    let mut out: Option<Vec<u8>> = None;
    for (i, (&v, (&o, &t))) in x.iter().zip(ours.iter().zip(theirs)).enumerate() {
        let q = v / scale;
        let mine = if recode { code(q) } else { f64::from(o) };
        let t = f64::from(t);
        let taken = match mine == t {
            true => mine,
            false => {
                differs = true;
                let rms = *spread.get_or_insert_with(|| rms(x));
                let r = 2.0 * (d.noise_atol() + d.rtol * v.abs().max(rms)) / scale;
                one(v, (q, r), t, code, &mut a).unwrap_or(mine)
            }
        };
        if taken != f64::from(o) {
            out.get_or_insert_with(|| ours.to_vec())[i] = taken as u8;
        }
    }
    (differs || recode).then_some((out, a))
}

/// One differing element (input `v`, `q` = v / scale and its noise `r` in those units) against the target's code
/// `t`: the target's when `v` is NaN (counted undefined) or when `q` moved by a fraction of `r` reaches it across one
/// boundary (counted a flip); `None` (counted beyond) otherwise.
fn one(
    v: f64,
    (q, r): (f64, f64),
    t: f64,
    code: impl Fn(f64) -> f64,
    a: &mut Adopted,
) -> Option<f64> {
    if v.is_nan() {
        a.undefined += 1;
        return Some(t);
    }
    for f in LADDER {
        let (lo, hi) = (code(q - f * r), code(q + f * r));
        let (l, h) = (lo.min(hi), lo.max(hi));
        if (l..=h).contains(&t) && h - l <= 1.0 {
            a.flips += 1;
            a.within = a.within.max(f);
            return Some(t);
        }
    }
    a.beyond += 1;
    None
}

#[cfg(test)]
mod tests {
    use super::super::{moved, radius};
    use super::*;

    fn decision(v: Vec<f64>) -> Decision {
        let target = super::super::Kept::Memory(std::sync::Arc::new(crate::tensor::Tensor::F64(
            tract_ndarray::ArrayD::from_shape_vec(vec![v.len()], v).unwrap(),
        )));
        Decision::new(target, 1e-4, 1e-3)
    }

    #[test]
    fn a_dynamic_zero_point_one_level_off_at_a_boundary_is_adopted_with_the_codes() {
        // min −1.0 over scale 2/255 puts the zero point at 127.5: ties to even give 128; the target said 127.
        let x: [f64; 3] = [-1.0, 1.0, 0.5 - 1e-9];
        let scale: f64 = 2.0 / 255.0;
        let at = |zp: f64| -> Vec<f64> {
            (x.iter())
                .map(|v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0))
                .collect()
        };
        let ours: Vec<u8> = at(128.0).iter().map(|&c| c as u8).collect();
        let theirs = at(127.0);
        let (zp, y) = (decision(vec![127.0]), decision(theirs.clone()));
        let (taken, za, codes) = reconcile(&x, (scale, 128.0), Some(&zp), Some((&y, &ours)));
        assert_eq!(taken, 127.0);
        assert_eq!(za.unwrap().flips, 1);
        let (codes, _) = codes.unwrap();
        let want: Vec<u8> = theirs.iter().map(|&c| c as u8).collect();
        assert_eq!(codes.unwrap(), want);
    }

    /// The element-by-element pass against the definition (whole vectors through [`settle`], as it was written
    /// first), on random inputs whose target codes sit one level off near boundaries, far off, or equal.
    #[test]
    fn one_pass_codes_match_the_vector_definition() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut flips = 0;
        for case in 0..200 {
            let n = 1 + (rand() * 300.0) as usize;
            let scale = 0.001 + rand() * 0.05;
            let (zp_ours, zp_taken) = (100.0, if case % 3 == 0 { 101.0 } else { 100.0 });
            let code = |v: f64, zp: f64| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0);
            let (mut x, mut theirs) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for i in 0..n {
                let (v, t) = match rand() {
                    // A NaN input: the target's codes are u8 all the same.
                    _ if i == 0 && case % 7 == 0 => (f64::NAN, 5.0),
                    // Across a rounding boundary from the target's input, by up to a third of a level: near ones
                    // within the noise (a flip), farther ones beyond it.
                    u if u < 0.3 => {
                        let mid = (rand() * 150.0).floor() - 49.5;
                        let off = (rand() - 0.5) * 0.6 * 10f64.powf(-6.0 * rand());
                        ((mid + off) * scale, code((mid - off) * scale, zp_taken))
                    }
                    // Far off: three levels.
                    u if u < 0.35 => {
                        let v = (rand() - 0.4) * 255.0 * scale;
                        (v, (code(v, zp_taken) + 3.0).min(255.0))
                    }
                    _ => {
                        let v = (rand() - 0.4) * 255.0 * scale;
                        (v, code(v, zp_taken))
                    }
                };
                x.push(v);
                theirs.push(t);
            }
            let ours: Vec<u8> = x.iter().map(|&v| code(v, zp_ours) as u8).collect();
            let d = decision(theirs.clone());
            let got = codes(&x, scale, (zp_ours, zp_taken), &ours, &target_codes(&d), &d);
            let want = definition(&x, scale, (zp_ours, zp_taken), &ours, &theirs, &d);
            let got = got.map(|(v, a)| (v.unwrap_or_else(|| ours.clone()), a));
            flips += want.as_ref().map_or(0, |(_, a)| a.flips);
            assert_eq!(got, want, "case {case}");
        }
        assert!(
            flips > 1000,
            "{flips} flips: the cases should exercise the boundaries"
        );
    }

    /// The codes' reconciliation as first written: every vector whole, through [`settle`].
    fn definition(
        x: &[f64],
        scale: f64,
        (zp_ours, zp_taken): (f64, f64),
        ours: &[u8],
        theirs: &[f64],
        d: &Decision,
    ) -> Option<(Vec<u8>, Adopted)> {
        let q: Vec<f64> = x.iter().map(|v| v / scale).collect();
        let r: Vec<f64> = (radius(x, d.noise_atol(), d.rtol).iter())
            .map(|v| 2.0 * v / scale)
            .collect();
        let code = |v: f64| (v.round_ties_even() + zp_taken).clamp(0.0, 255.0);
        let recoded: Vec<f64> = match zp_taken == zp_ours {
            true => ours.iter().map(|&c| f64::from(c)).collect(),
            false => q.iter().map(|&v| code(v)).collect(),
        };
        let bounds = |f: f64| {
            let at = |s: f64| moved(&q, &r, f, s).into_iter().map(code).collect();
            Some((at(-1.0), at(1.0)))
        };
        let settled = match settle(&recoded, theirs, bounds, |i| x[i].is_nan()) {
            Some(s) => Some(s),
            None => (zp_taken != zp_ours).then(|| (recoded, Adopted::default())),
        };
        settled.map(|(v, a)| (v.iter().map(|&c| c as u8).collect(), a))
    }
}
