//! What an op implementation sees: its node, its inputs (on the device or on the host), attributes, and the
//! command encoder its dispatches go into. Values are [`DevVal`]s: a shared buffer, a shape and the element type
//! reported for it (f16 in f16 mode, where the buffer holds f16 or f16-rounded f32).

use std::collections::HashMap;
use std::rc::Rc;

use half::f16;
use tract_onnx::pb::NodeProto;

use super::gpu::{Bind, Buf, Gpu};
use super::shaders::Mode;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// A value held on the device.
#[derive(Clone)]
pub struct DevVal {
    pub buf: Rc<Buf>,
    pub shape: Vec<usize>,
    /// The element type reported for it: F32, F16 or Bf16 in the storage type, or Bool, I64, I8 or U8 held as one
    /// 32-bit word per element (comparisons, arg-reductions, quantized products).
    pub dtype: DType,
}

impl DevVal {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the buffer holds one 32-bit word per element (a boolean or an index) rather than floats.
    pub fn is_words(&self) -> bool {
        !self.dtype.is_float()
    }

    /// Bytes the value takes on the device in `mode`.
    pub fn bytes(&self, mode: Mode) -> u64 {
        let per = if self.is_words() {
            4
        } else {
            mode.elem_bytes()
        };
        self.len() as u64 * per
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What an op produced.
pub enum Out {
    Dev(Vec<DevVal>),
    /// Not done on the device: the reason, and the node runs on the host instead.
    Host(String),
}

/// Every value of the run: host copies of everything (initializers, inputs, each value read back) and the device
/// copies still needed by a later node.
#[derive(Default)]
pub struct Store {
    pub host: HashMap<String, Tensor>,
    pub dev: HashMap<String, DevVal>,
    /// Integer and boolean values uploaded for index/condition bindings.
    pub aux: HashMap<String, Rc<Buf>>,
    /// Host values uploaded in f16 that f16 cannot hold (overflow to infinity, flush to zero).
    pub out_of_range: Vec<crate::precision::convert::RangeIssue>,
}

pub struct Ctx<'a> {
    pub gpu: &'a Gpu,
    pub node: &'a NodeProto,
    pub opset: i64,
    pub enc: wgpu::CommandEncoder,
    pub store: &'a mut Store,
    /// Set when a value exceeds the adapter's storage binding limit: nothing more is dispatched and the node
    /// runs on the host.
    pub too_big: bool,
}

fn unsupported(what: String) -> Error {
    Error::Wgpu { reason: what }
}

impl<'a> Ctx<'a> {
    pub fn label(&self) -> &str {
        &self.node.name
    }

    /// Whether input `i` is given.
    pub fn has(&self, i: usize) -> bool {
        self.node.input.get(i).is_some_and(|n| !n.is_empty())
    }

    pub fn host(&self, i: usize) -> Option<&Tensor> {
        let name = self.node.input.get(i).filter(|n| !n.is_empty())?;
        self.store.host.get(name)
    }

    pub fn dtype(&self, i: usize) -> Option<DType> {
        let name = self.node.input.get(i)?;
        if let Some(d) = self.store.dev.get(name) {
            return Some(d.dtype);
        }
        self.host(i).map(Tensor::dtype)
    }

    pub fn is_float(&self, i: usize) -> bool {
        self.dtype(i).is_some_and(|d| d.is_float())
    }

    pub fn shape(&self, i: usize) -> Option<Vec<usize>> {
        let name = self.node.input.get(i)?;
        if let Some(d) = self.store.dev.get(name) {
            return Some(d.shape.clone());
        }
        self.host(i).map(|t| t.shape().to_vec())
    }

    /// Input `i` as integers (shape inputs, axes, pads...), from its host copy.
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        let t = self.host(i)?;
        Some(t.to_f64_array().iter().map(|&v| v as i64).collect())
    }

    /// Input `i` as floats (a scalar `min`, `max`...), from its host copy.
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        Some(self.host(i)?.to_f64_array().iter().copied().collect())
    }

    /// The element type outputs of this node get: f16 in f16 mode, else that of the first float input.
    pub fn out_dtype(&self) -> DType {
        if self.gpu.mode.is_f16() {
            return DType::F16;
        }
        (0..self.node.input.len())
            .filter_map(|i| self.dtype(i))
            .find(|d| d.is_float())
            .unwrap_or(DType::F32)
    }

    /// Input `i` on the device (uploaded from its host copy, in the storage type, the first time).
    pub fn dev(&mut self, i: usize) -> Result<DevVal> {
        let name = self
            .node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| unsupported(format!("{}: input {i} is missing", self.node.name)))?
            .clone();
        if let Some(d) = self.store.dev.get(&name) {
            if d.is_words() {
                return Err(unsupported(format!(
                    "{}: `{name}` holds {} where a float is expected",
                    self.node.name, d.dtype
                )));
            }
            return Ok(d.clone());
        }
        let t = self
            .store
            .host
            .get(&name)
            .ok_or_else(|| unsupported(format!("{}: no value for `{name}`", self.node.name)))?;
        let v = upload_float(self.gpu, t, &name, &mut self.store.out_of_range)?;
        self.store.dev.insert(name, v.clone());
        Ok(v)
    }

    /// Input `i` (integers or booleans) on the device as one 32-bit word per element.
    pub fn dev_words(&mut self, i: usize) -> Result<Rc<Buf>> {
        let name = self.node.input[i].clone();
        if let Some(b) = self.store.aux.get(&name) {
            return Ok(b.clone());
        }
        if let Some(v) = self.store.dev.get(&name).filter(|v| v.is_words()) {
            return Ok(v.buf.clone());
        }
        let t = self
            .host(i)
            .ok_or_else(|| unsupported(format!("{}: no value for `{name}`", self.node.name)))?;
        let words: Vec<u8> = t
            .to_f64_array()
            .iter()
            .flat_map(|&v| (v as i64 as i32).to_le_bytes())
            .collect();
        let b = Rc::new(self.gpu.upload(&words));
        self.store.aux.insert(name, b.clone());
        Ok(b)
    }

    /// A fresh output value.
    pub fn output(&mut self, shape: Vec<usize>, dtype: DType) -> DevVal {
        let n: usize = shape.iter().product();
        DevVal {
            buf: Rc::new(self.gpu.alloc(n as u64 * self.gpu.mode.elem_bytes())),
            shape,
            dtype,
        }
    }

    /// A fresh output of one 32-bit word per element, reported as `dtype` (Bool or I64).
    pub fn output_words(&mut self, shape: Vec<usize>, dtype: DType) -> DevVal {
        let n: usize = shape.iter().product();
        DevVal {
            buf: Rc::new(self.gpu.alloc(n as u64 * 4)),
            shape,
            dtype,
        }
    }

    /// Records a 1-D dispatch over `n` invocations.
    pub fn run(
        &mut self,
        shader: &str,
        entry: &'static str,
        params: &[u32],
        inputs: &[Option<&Buf>],
        out: &DevVal,
        n: usize,
    ) -> Result<()> {
        self.run_groups(shader, entry, params, inputs, out, Gpu::groups_1d(n))
    }

    /// Records a dispatch of one 256-wide workgroup per row.
    pub fn run_rows(
        &mut self,
        shader: &str,
        entry: &'static str,
        params: &[u32],
        inputs: &[Option<&Buf>],
        out: &DevVal,
        rows: usize,
    ) -> Result<()> {
        self.run_groups(shader, entry, params, inputs, out, Gpu::groups_rows(rows))
    }

    pub fn run_groups(
        &mut self,
        shader: &str,
        entry: &'static str,
        params: &[u32],
        inputs: &[Option<&Buf>],
        out: &DevVal,
        groups: [u32; 3],
    ) -> Result<()> {
        let limit = self.gpu.max_binding();
        let bytes = |b: &Buf| b.bytes.min(b.raw.size());
        if self.too_big
            || bytes(&out.buf) > limit
            || inputs.iter().flatten().any(|b| bytes(b) > limit)
        {
            self.too_big = true;
            return Ok(());
        }
        let label = self.node.name.clone();
        self.gpu.dispatch(
            &mut self.enc,
            shader,
            entry,
            params,
            inputs,
            &out.buf,
            groups,
            &label,
        )
    }

    /// A 1-D dispatch over `n` output elements split into chunks that each bind at most the adapter's limit:
    /// `chunked[k]` inputs (same length as the output) are bound over the chunk's range, the others whole (they must
    /// fit); `params(start, len)` gives each chunk's parameter block.
    pub fn run_chunked(
        &mut self,
        shader: &str,
        params: impl Fn(usize, usize) -> Vec<u32>,
        inputs: &[(&Buf, bool)],
        out: &DevVal,
        n: usize,
    ) -> Result<()> {
        let eb = self.gpu.mode.elem_bytes();
        let limit = self.gpu.max_binding();
        if self.too_big || inputs.iter().any(|(b, chunk)| !chunk && b.bytes > limit) {
            self.too_big = true;
            return Ok(());
        }
        // Chunks start at multiples of 1,024 elements: aligned for every storage offset alignment in use.
        let per = ((limit / eb) as usize / 1024 * 1024).max(1024);
        let mut start = 0;
        while start < n.max(1) {
            let len = per.min(n - start);
            let ins: Vec<Option<Bind>> = inputs
                .iter()
                .map(|(b, chunk)| {
                    Some(match chunk {
                        true => Bind {
                            buf: b,
                            offset: start as u64 * eb,
                            size: Some((len as u64 * eb).div_ceil(4) * 4),
                        },
                        false => Bind::from(*b),
                    })
                })
                .collect();
            let o = Bind {
                buf: &out.buf,
                offset: start as u64 * eb,
                size: Some((len as u64 * eb).div_ceil(4) * 4),
            };
            let label = self.node.name.clone();
            self.gpu.dispatch_bound(
                &mut self.enc,
                shader,
                "main",
                &params(start, len),
                &ins,
                o,
                Gpu::groups_1d(len),
                &label,
            )?;
            if n == 0 {
                break;
            }
            start += len;
        }
        Ok(())
    }

    pub fn attr_i(&self, name: &str, default: i64) -> i64 {
        attr(self.node, name).map(|a| a.i).unwrap_or(default)
    }

    pub fn attr_f(&self, name: &str, default: f32) -> f32 {
        attr(self.node, name).map(|a| a.f).unwrap_or(default)
    }

    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        attr(self.node, name).map(|a| a.ints.clone())
    }

    pub fn attr_s(&self, name: &str, default: &str) -> String {
        attr(self.node, name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
            .unwrap_or_else(|| default.to_string())
    }
}

pub fn attr<'n>(n: &'n NodeProto, name: &str) -> Option<&'n tract_onnx::pb::AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

/// A float host tensor on the device in the storage type (f16 bits natively, f16-rounded f32 when emulated).
pub fn upload_float(
    gpu: &Gpu,
    t: &Tensor,
    name: &str,
    out_of_range: &mut Vec<crate::precision::convert::RangeIssue>,
) -> Result<DevVal> {
    if !t.dtype().is_float() {
        return Err(unsupported(format!(
            "`{name}` is {} where a float is expected",
            t.dtype()
        )));
    }
    let a = t.to_f64_array();
    let bytes: Vec<u8> = match gpu.mode {
        Mode::F16Native => a
            .iter()
            .flat_map(|&v| crate::tensor::narrow::f16_of(v).to_bits().to_le_bytes())
            .collect(),
        Mode::F16Emulated => a
            .iter()
            .flat_map(|&v| crate::tensor::narrow::f16_of(v).to_f32().to_le_bytes())
            .collect(),
        Mode::F32 => a.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
    };
    if gpu.mode.is_f16() {
        out_of_range.extend(crate::precision::convert::range_issues(
            name,
            a.iter().copied(),
            crate::precision::LowPrecision::F16,
        ));
    }
    let dtype = match gpu.mode.is_f16() {
        true => DType::F16,
        false if t.dtype() == DType::F64 => DType::F32,
        false => t.dtype(),
    };
    Ok(DevVal {
        buf: Rc::new(gpu.upload(&bytes)),
        shape: t.shape().to_vec(),
        dtype,
    })
}

/// The host tensor of a device value's bytes.
pub fn download(gpu: &Gpu, v: &DevVal, bytes: &[u8]) -> Tensor {
    let shape = ndarray::IxDyn(&v.shape);
    let f32s = || -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let arr = |d: Vec<f32>| ndarray::ArrayD::from_shape_vec(shape.clone(), d).expect("sized");
    if v.is_words() {
        return download_words(v, bytes);
    }
    match (gpu.mode, v.dtype) {
        (Mode::F16Native, _) => Tensor::F16(
            ndarray::ArrayD::from_shape_vec(
                shape.clone(),
                bytes
                    .chunks_exact(2)
                    .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            )
            .expect("sized"),
        ),
        (_, DType::F16) => Tensor::F16(arr(f32s()).mapv(f16::from_f32)),
        (_, DType::Bf16) => Tensor::Bf16(arr(f32s()).mapv(half::bf16::from_f32)),
        _ => Tensor::F32(arr(f32s())),
    }
}

/// The host tensor of a value held as one 32-bit word per element.
fn download_words(v: &DevVal, bytes: &[u8]) -> Tensor {
    let words: Vec<i32> = bytes
        .chunks_exact(4)
        .take(v.len())
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let arr = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&v.shape), words).expect("sized");
    match v.dtype {
        DType::Bool => Tensor::Bool(arr.mapv(|w| w != 0)),
        DType::U8 => Tensor::U8(arr.mapv(|w| w as u8)),
        DType::I8 => Tensor::I8(arr.mapv(|w| w as i8)),
        _ => Tensor::I64(arr.mapv(i64::from)),
    }
}
