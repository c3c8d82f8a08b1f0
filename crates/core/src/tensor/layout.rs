//! Memory layouts a runtime keeps a value in that are not ONNX's row-major order of its shape: ONNX Runtime's
//! NCHWc blocks (its CPU optimizer's `com.microsoft.nchwc` ops), where an [N, C, H, W] value holds its elements in
//! the order [N, C/B, H, W, B], and a convolution's filter is stored reordered as MLAS reorders it
//! (`MlasReorderFilterOIHWBo`, `MlasReorderFilterOIHWBiBo`, onnxruntime/core/mlas/lib/reorder.cpp).

use super::Tensor;

/// MLAS's NCHWc block size on this CPU (`MlasNchwcGetBlockSize`, onnxruntime/core/mlas/lib/platform.cpp): 16 with
/// AVX-512F or on ARM64, 8 on other x86-64 CPUs. A model is optimized for, and run on, one CPU's block size.
pub fn nchwc_block_size() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        match std::arch::is_x86_feature_detected!("avx512f") {
            true => 16,
            false => 8,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        16
    }
}

/// Whether an NCHWc convolution's filter of `dims` [O, I, kh, kw] is stored OIHWBiBo (input channels blocked too:
/// ungrouped, at least one block of them) rather than OIHWBo.
pub fn nchwc_filter_bibo(block: usize, dims: &[usize], group: i64) -> bool {
    group == 1 && dims.get(1).is_some_and(|&i| i >= block)
}

/// The flat index in the stored filter of every element of its OIHW form ([O, I, kh, kw] stored dims, O a
/// multiple of the block; `bibo`: input channels blocked too, I a multiple of the block).
pub fn nchwc_filter_sources(b: usize, w: &[usize], bibo: bool) -> Vec<usize> {
    let (o, i, k) = (w[0], w[1], w[2] * w[3]);
    let mut idx = Vec::with_capacity(o * i * k);
    for oc in 0..o {
        for ic in 0..i {
            for t in 0..k {
                let (ob, bo) = (oc / b, oc % b);
                idx.push(match bibo {
                    true => ((((ob * (i / b) + ic / b) * k + t) * b + ic % b) * b) + bo,
                    false => ((ob * i + ic) * k + t) * b + bo,
                });
            }
        }
    }
    idx
}

impl Tensor {
    /// A blocked [N, C, H, W] value in row-major order of its shape (None unless rank 4 with C a multiple of
    /// `block`).
    pub fn unblocked(&self, block: usize) -> Option<Tensor> {
        let s = self.shape().to_vec();
        if s.len() != 4 || block == 0 || !s[1].is_multiple_of(block) {
            return None;
        }
        let t = self.standard_layout();
        let blocked = ndarray::IxDyn(&[s[0], s[1] / block, s[2], s[3], block]);
        let plain = ndarray::IxDyn(&s);
        macro_rules! un {
            ($($v:ident),*) => {
                match t.as_ref() {
                    $(Tensor::$v(a) => {
                        let b = a.clone().into_shape_with_order(blocked).ok()?;
                        let p = b.permuted_axes(ndarray::IxDyn(&[0, 1, 4, 2, 3]));
                        Tensor::$v(p.as_standard_layout().into_owned().into_shape_with_order(plain).ok()?)
                    })*
                }
            };
        }
        Some(un!(
            F64, F32, F16, Bf16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, Str
        ))
    }
}

impl Tensor {
    /// An [N, C, H, W] value with its first `channels` channels only: an unblocked NCHWc value without the channels
    /// ONNX Runtime pads a block with (a convolution of 24 filters writes 32 channels where a block holds 16). None
    /// unless rank 4 with at least `channels` channels.
    pub fn channels_cropped(&self, channels: usize) -> Option<Tensor> {
        let s = self.shape();
        if s.len() != 4 || channels > s[1] {
            return None;
        }
        let slice = ndarray::Slice::from(0..channels);
        macro_rules! crop {
            ($($v:ident),*) => {
                match self {
                    $(Tensor::$v(a) => Tensor::$v(a.slice_axis(ndarray::Axis(1), slice).to_owned()),)*
                }
            };
        }
        Some(crop!(
            F64, F32, F16, Bf16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, Str
        ))
    }

    /// A channels-last value (N, spatial…, C; rank 3 to 5) read channels-first (N, C, spatial…): what an NHWC
    /// layout holds, in the NCHW order the model's value has. None for other ranks.
    pub fn channels_first(&self) -> Option<Tensor> {
        let r = self.shape().len();
        if !(3..=5).contains(&r) {
            return None;
        }
        let perm: Vec<usize> = [0, r - 1].into_iter().chain(1..r - 1).collect();
        macro_rules! cf {
            ($($v:ident),*) => {
                match self {
                    $(Tensor::$v(a) => Tensor::$v(
                        a.view().permuted_axes(ndarray::IxDyn(&perm)).as_standard_layout().into_owned(),
                    ),)*
                }
            };
        }
        Some(cf!(
            F64, F32, F16, Bf16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, Str
        ))
    }

    /// An NCHWc convolution's stored filter (rank 4, O a multiple of `block`) in OIHW order; None where its dims do
    /// not fit the blocks.
    pub fn unblocked_filter(&self, block: usize, group: i64) -> Option<Tensor> {
        let s = self.shape().to_vec();
        let bibo = nchwc_filter_bibo(block, &s, group);
        if s.len() != 4
            || block == 0
            || !s[0].is_multiple_of(block)
            || (bibo && !s[1].is_multiple_of(block))
        {
            return None;
        }
        let idx = nchwc_filter_sources(block, &s, bibo);
        let t = self.standard_layout();
        macro_rules! gather {
            ($($v:ident),*) => {
                match t.as_ref() {
                    $(Tensor::$v(a) => {
                        let flat = a.as_slice()?;
                        let picked = idx.iter().map(|&i| flat[i].clone()).collect();
                        Tensor::$v(ndarray::ArrayD::from_shape_vec(s.clone(), picked).ok()?)
                    })*
                }
            };
        }
        Some(gather!(
            F64, F32, F16, Bf16, I64, I32, I16, I8, U64, U32, U16, U8, Bool, Str
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_value_reads_back_channel_by_channel() {
        // [1, 4, 1, 2] in blocks of 2: stored c0p0 c1p0 c0p1 c1p1 | c2p0 c3p0 c2p1 c3p1.
        let stored: [f32; 8] = [0.0, 10.0, 1.0, 11.0, 20.0, 30.0, 21.0, 31.0];
        let t = Tensor::F32(
            ndarray::ArrayD::from_shape_vec(vec![1, 4, 1, 2], stored.to_vec()).unwrap(),
        );
        let Some(Tensor::F32(u)) = t.unblocked(2) else {
            panic!("not unblocked")
        };
        assert_eq!(
            u.iter().copied().collect::<Vec<_>>(),
            [0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0]
        );
        assert!(t.unblocked(3).is_none());
    }

    #[test]
    fn filters_read_back_as_mlas_reorders_them() {
        // OIHWBo, 4 outputs (one block), 2 inputs, a 1×1 kernel: stored [i][bo].
        assert_eq!(
            nchwc_filter_sources(4, &[4, 2, 1, 1], false),
            [0, 4, 1, 5, 2, 6, 3, 7]
        );
        // OIHWBiBo, block 2, 2 outputs, 2 inputs, 1×1: stored [bi][bo]; W[o][i] sits at i·2 + o.
        assert_eq!(nchwc_filter_sources(2, &[2, 2, 1, 1], true), [0, 2, 1, 3]);
        assert!(
            nchwc_filter_bibo(8, &[16, 8, 3, 3], 1) && !nchwc_filter_bibo(8, &[16, 3, 3, 3], 1)
        );
        assert!(!nchwc_filter_bibo(8, &[16, 1, 3, 3], 16));
    }
}
