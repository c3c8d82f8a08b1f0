//! `--slice`: compare only part of each tensor. `:,:64,:64` slices the leading axes NumPy-style (`start:stop:step`
//! per axis, axes beyond the spec whole, spec entries beyond a tensor's rank ignored); a lone `::K` keeps every K-th
//! element of the flattened tensor. Both sides are sliced the same way before any metric is taken.

use ndarray::{ArrayD, Axis, IxDyn, Slice};

use crate::tensor::Tensor;

/// One axis: start, stop, step (NumPy semantics, negative start/stop count from the end).
#[derive(Clone, Copy, Debug, PartialEq)]
struct AxisSpec {
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
}

/// A parsed `--slice` spec (saved as the text it was parsed from).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SliceSpec {
    source: String,
    axes: Vec<AxisSpec>,
    /// A lone `::K`: every K-th element of the flattened tensor.
    flat_step: Option<usize>,
}

fn parse_axis(s: &str) -> Result<AxisSpec, String> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() > 3 {
        return Err(format!("`{s}`: at most start:stop:step"));
    }
    let num = |p: Option<&&str>| -> Result<Option<isize>, String> {
        match p.map(|x| x.trim()).filter(|x| !x.is_empty()) {
            None => Ok(None),
            Some(x) => x
                .parse()
                .map(Some)
                .map_err(|_| format!("`{x}` is not an integer")),
        }
    };
    if parts.len() == 1 {
        // A single index keeps that one position (as a length-1 axis).
        let i = num(parts.first())?.ok_or_else(|| format!("`{s}`: empty axis"))?;
        return Ok(AxisSpec {
            start: Some(i),
            stop: Some(if i == -1 {
                isize::MAX
            } else {
                i.saturating_add(1)
            }),
            step: 1,
        });
    }
    let step = num(parts.get(2))?.unwrap_or(1);
    if step <= 0 {
        return Err(format!("`{s}`: the step must be positive"));
    }
    let (start, stop) = (num(parts.first())?, num(parts.get(1))?);
    if let (Some(a), Some(b)) = (start, stop) {
        if (a >= 0) == (b >= 0) && b <= a {
            return Err(format!(
                "`{s}`: selects nothing (stop {b} is not after start {a})"
            ));
        }
    }
    Ok(AxisSpec { start, stop, step })
}

impl SliceSpec {
    /// The text this spec was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Parses `:,:64,:64`, `0,::2`, `::4`.
    pub fn parse(s: &str) -> Result<SliceSpec, String> {
        let axes: Vec<AxisSpec> = s.split(',').map(parse_axis).collect::<Result<_, _>>()?;
        let flat_step = match axes.as_slice() {
            [a] if a.start.is_none() && a.stop.is_none() && a.step > 1 => Some(a.step as usize),
            _ => None,
        };
        Ok(SliceSpec {
            source: s.to_string(),
            axes,
            flat_step,
        })
    }

    fn apply_arr<T: Clone>(&self, a: &ArrayD<T>) -> ArrayD<T> {
        if let Some(k) = self.flat_step {
            let v: Vec<T> = a.iter().step_by(k).cloned().collect();
            let n = v.len();
            return ArrayD::from_shape_vec(IxDyn(&[n]), v).expect("1-D");
        }
        let mut v = a.view();
        for (ax, s) in self.axes.iter().enumerate().take(a.ndim()) {
            let len = v.len_of(Axis(ax)) as isize;
            let fix = |x: isize| if x < 0 { (len + x).max(0) } else { x.min(len) };
            let start = s.start.map(fix).unwrap_or(0);
            let stop = s.stop.map(fix).unwrap_or(len).max(start);
            v.slice_axis_inplace(Axis(ax), Slice::new(start, Some(stop), s.step));
        }
        v.to_owned()
    }

    /// The slice of `t`.
    pub fn apply(&self, t: &Tensor) -> Tensor {
        match t {
            Tensor::F64(a) => Tensor::F64(self.apply_arr(a)),
            Tensor::F32(a) => Tensor::F32(self.apply_arr(a)),
            Tensor::F16(a) => Tensor::F16(self.apply_arr(a)),
            Tensor::Bf16(a) => Tensor::Bf16(self.apply_arr(a)),
            Tensor::I64(a) => Tensor::I64(self.apply_arr(a)),
            Tensor::I32(a) => Tensor::I32(self.apply_arr(a)),
            Tensor::I16(a) => Tensor::I16(self.apply_arr(a)),
            Tensor::I8(a) => Tensor::I8(self.apply_arr(a)),
            Tensor::U64(a) => Tensor::U64(self.apply_arr(a)),
            Tensor::U32(a) => Tensor::U32(self.apply_arr(a)),
            Tensor::U16(a) => Tensor::U16(self.apply_arr(a)),
            Tensor::U8(a) => Tensor::U8(self.apply_arr(a)),
            Tensor::Bool(a) => Tensor::Bool(self.apply_arr(a)),
            Tensor::Str(a) => Tensor::Str(self.apply_arr(a)),
        }
    }
}

impl TryFrom<String> for SliceSpec {
    type Error = String;
    fn try_from(s: String) -> Result<SliceSpec, String> {
        SliceSpec::parse(&s)
    }
}

impl From<SliceSpec> for String {
    fn from(s: SliceSpec) -> String {
        s.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f32).collect()).unwrap(),
        )
    }

    #[test]
    fn slices_like_numpy() {
        let s = SliceSpec::parse(":,1:3,::2").unwrap();
        let out = s.apply(&t(&[2, 4, 4]));
        assert_eq!(out.shape(), &[2, 2, 2]);
        let Tensor::F32(a) = out else { panic!() };
        assert_eq!(
            a.iter().copied().collect::<Vec<_>>(),
            vec![4., 6., 8., 10., 20., 22., 24., 26.]
        );
        // Beyond the ends is clamped; negative indices count from the end; extra axes are ignored.
        let s = SliceSpec::parse("-1,:100,:,:").unwrap();
        assert_eq!(s.apply(&t(&[3, 2])).shape(), &[1, 2]);
        let s = SliceSpec::parse("::4").unwrap();
        assert_eq!(s.apply(&t(&[2, 8])).shape(), &[4]);
        assert!(SliceSpec::parse("::0").is_err());
        assert!(SliceSpec::parse("a:b").is_err());
    }
}
