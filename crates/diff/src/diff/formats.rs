//! The tensors one file holds, listed without reading their data, and read one at a time: `.npy`, `.npz`,
//! `.safetensors` (header parsed into `safetensors`' own types, data read by byte range), PyTorch `.pt`/`.pth`/`.bin`
//! (torch ≥ 1.6 zip and legacy formats, through `pytorch-reader`, after [`super::pickle`] has refused any pickle
//! that names more than tensors and containers) and ONNX `TensorProto` (`.pb`, ONNX Runtime's `.tensorproto` dumps).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// How one tensor is read.
#[derive(Clone)]
pub enum Loader {
    Npy(PathBuf),
    NpzEntry(PathBuf, String),
    Safetensors {
        path: PathBuf,
        start: u64,
        info: safetensors::tensor::TensorInfo,
    },
    Torch(PathBuf, pytorch_reader::Tensor),
    Proto(PathBuf),
}

/// One tensor of a dump: its key inside its file (empty for a single-tensor file) and how to read it.
#[derive(Clone)]
pub struct Item {
    pub key: String,
    pub load: Loader,
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Limit {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The file's format from its name, or `None` for a file that holds no tensors phantom reads.
pub fn kind(name: &str) -> Option<&'static str> {
    let lower = name.to_lowercase();
    let ext = lower.rsplit('.').next().unwrap_or("");
    Some(match ext {
        "npy" => "npy",
        "npz" => "npz",
        "safetensors" => "safetensors",
        "pt" | "pth" | "bin" | "ckpt" => "torch",
        "pb" | "tensorproto" => "tensorproto",
        _ => return None,
    })
}

/// The tensors of file `path` (format from its name).
pub fn list(path: &Path) -> Result<Vec<Item>> {
    let name = path.to_string_lossy();
    match kind(&name) {
        Some("npy") => Ok(vec![single(Loader::Npy(path.to_path_buf()))]),
        Some("tensorproto") => Ok(vec![single(Loader::Proto(path.to_path_buf()))]),
        Some("npz") => npz_keys(path),
        Some("safetensors") => safetensors_keys(path),
        Some("torch") => torch_keys(path),
        _ => Ok(vec![]),
    }
}

fn single(load: Loader) -> Item {
    Item {
        key: String::new(),
        load,
    }
}

fn npz_keys(path: &Path) -> Result<Vec<Item>> {
    let f = std::fs::File::open(path).map_err(|e| bad(path, format!("cannot open it: {e}")))?;
    let z = zip::ZipArchive::new(f).map_err(|e| bad(path, format!("not a readable .npz: {e}")))?;
    Ok(z.file_names()
        .filter(|n| n.ends_with(".npy"))
        .map(|n| Item {
            key: n.trim_end_matches(".npy").to_string(),
            load: Loader::NpzEntry(path.to_path_buf(), n.to_string()),
        })
        .collect())
}

fn safetensors_keys(path: &Path) -> Result<Vec<Item>> {
    let mut f = std::fs::File::open(path).map_err(|e| bad(path, format!("cannot open it: {e}")))?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut n = [0u8; 8];
    f.read_exact(&mut n)
        .map_err(|_| bad(path, "truncated .safetensors (no header length)"))?;
    let n = u64::from_le_bytes(n);
    if n > 100 << 20 || 8 + n > size {
        return Err(bad(
            path,
            format!("the .safetensors header claims {n} bytes: truncated or not safetensors"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header)
        .map_err(|_| bad(path, "truncated .safetensors header"))?;
    let map: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| {
            bad(
                path,
                format!("the .safetensors header is not valid JSON: {e}"),
            )
        })?;
    let mut items = vec![];
    for (key, v) in map.into_iter().filter(|(k, _)| k != "__metadata__") {
        let info: safetensors::tensor::TensorInfo =
            serde_json::from_value(v).map_err(|e| bad(path, format!("tensor `{key}`: {e}")))?;
        if 8 + n + info.data_offsets.1 as u64 > size {
            return Err(bad(
                path,
                format!("tensor `{key}` ends beyond the file: truncated"),
            ));
        }
        items.push(Item {
            key,
            load: Loader::Safetensors {
                path: path.to_path_buf(),
                start: 8 + n,
                info,
            },
        });
    }
    Ok(items)
}

/// Refuses `pickle` (from `what`, holding `count` pickles in a row) when one names more than tensors and containers.
fn check_pickle(path: &Path, what: &str, pickle: &[u8], count: usize) -> Result<()> {
    let mut at = 0;
    for _ in 0..count {
        let rest = pickle.get(at..).unwrap_or_default();
        let (forbidden, len) =
            super::pickle::scan(rest).map_err(|e| bad(path, format!("{what}: {e}")))?;
        if !forbidden.is_empty() {
            return Err(bad(
                path,
                format!(
                    "{what} asks Python to call {}: phantom reads tensors and containers only and never runs pickle code; save plain tensors (torch.save of a tensor or a dict of tensors)",
                    forbidden.join(", ")
                ),
            ));
        }
        at += len;
    }
    Ok(())
}

/// The pickles of a torch file, refused when one names more than tensors and containers (only the pickles are
/// read: the storages stay on disk).
fn check_pickles(path: &Path) -> Result<()> {
    let mut f = std::fs::File::open(path).map_err(|e| bad(path, format!("cannot open it: {e}")))?;
    let mut magic = [0u8; 4];
    let zip_format = f.read_exact(&mut magic).is_ok() && &magic == b"PK\x03\x04";
    if !zip_format {
        // Legacy: magic number, protocol, system info, the object and its storage keys, then raw storages.
        let bytes = std::fs::read(path).map_err(|e| bad(path, format!("cannot read it: {e}")))?;
        return check_pickle(path, "pickle stream", &bytes, 5);
    }
    let mut z = zip::ZipArchive::new(f)
        .map_err(|e| bad(path, format!("not a readable torch zip file: {e}")))?;
    let names: Vec<String> = z
        .file_names()
        .filter(|n| n.ends_with(".pkl"))
        .map(String::from)
        .collect();
    for n in names {
        let mut buf = vec![];
        let mut e = z.by_name(&n).map_err(|e| bad(path, e.to_string()))?;
        e.read_to_end(&mut buf)
            .map_err(|e| bad(path, format!("entry {n}: {e}")))?;
        check_pickle(path, &n, &buf, 1)?;
    }
    Ok(())
}

fn torch_keys(path: &Path) -> Result<Vec<Item>> {
    check_pickles(path)?;
    let r = pytorch_reader::PytorchReader::new(path)
        .map_err(|e| bad(path, format!("not a readable PyTorch file: {e}")))?;
    let mut items: Vec<Item> = r
        .tensors()
        .iter()
        .map(|(k, t)| Item {
            key: k.clone(),
            load: Loader::Torch(path.to_path_buf(), t.clone()),
        })
        .collect();
    items.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(items)
}

macro_rules! le {
    ($bytes:expr, $shape:expr, $t:ty, $n:literal, $wrap:expr) => {{
        let v: Vec<$t> = $bytes
            .chunks_exact($n)
            .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk")))
            .collect();
        $wrap(ArrayD::from_shape_vec(IxDyn($shape), v).map_err(|e| e.to_string())?)
    }};
}

/// A tensor from little-endian bytes of element type `dtype` (pytorch-reader's names).
fn tensor_from_le(
    dtype: pytorch_reader::DType,
    shape: &[usize],
    b: &[u8],
) -> std::result::Result<Tensor, String> {
    use pytorch_reader::DType as D;
    let expected = shape.iter().product::<usize>() * dtype.size();
    if b.len() != expected {
        return Err(format!(
            "{} bytes for shape {shape:?} of {dtype:?}: truncated",
            b.len()
        ));
    }
    Ok(match dtype {
        D::F64 => le!(b, shape, f64, 8, Tensor::F64),
        D::F32 => le!(b, shape, f32, 4, Tensor::F32),
        D::F16 => le!(b, shape, u16, 2, |a: ArrayD<u16>| Tensor::F16(
            a.mapv(f16::from_bits)
        )),
        D::BF16 => le!(b, shape, u16, 2, |a: ArrayD<u16>| Tensor::Bf16(
            a.mapv(bf16::from_bits)
        )),
        D::I64 => le!(b, shape, i64, 8, Tensor::I64),
        D::I32 => le!(b, shape, i32, 4, Tensor::I32),
        D::I16 => le!(b, shape, i16, 2, Tensor::I16),
        D::I8 => le!(b, shape, i8, 1, Tensor::I8),
        D::U64 => le!(b, shape, u64, 8, Tensor::U64),
        D::U32 => le!(b, shape, u32, 4, Tensor::U32),
        D::U16 => le!(b, shape, u16, 2, Tensor::U16),
        D::U8 => le!(b, shape, u8, 1, Tensor::U8),
        D::Bool => le!(b, shape, u8, 1, |a: ArrayD<u8>| Tensor::Bool(
            a.mapv(|x| x != 0)
        )),
    })
}

/// pytorch-reader's name for a safetensors element type phantom reads.
fn safetensors_dtype(d: safetensors::Dtype) -> Option<pytorch_reader::DType> {
    use pytorch_reader::DType as D;
    use safetensors::Dtype as S;
    Some(match d {
        S::F64 => D::F64,
        S::F32 => D::F32,
        S::F16 => D::F16,
        S::BF16 => D::BF16,
        S::I64 => D::I64,
        S::I32 => D::I32,
        S::I16 => D::I16,
        S::I8 => D::I8,
        S::U64 => D::U64,
        S::U32 => D::U32,
        S::U16 => D::U16,
        S::U8 => D::U8,
        S::BOOL => D::Bool,
        _ => return None,
    })
}

impl Loader {
    /// The file this tensor is read from.
    pub fn path(&self) -> &Path {
        match self {
            Loader::Npy(p) | Loader::NpzEntry(p, _) | Loader::Proto(p) | Loader::Torch(p, _) => p,
            Loader::Safetensors { path, .. } => path,
        }
    }

    /// Reads the tensor.
    pub fn read(&self) -> Result<Tensor> {
        let path = self.path();
        match self {
            Loader::Npy(p) => crate::model::npy::read_npy(p),
            Loader::Proto(p) => crate::model::proto::read_tensor_pb(p).map(|(_, t)| t),
            Loader::NpzEntry(p, entry) => {
                let f =
                    std::fs::File::open(p).map_err(|e| bad(p, format!("cannot open it: {e}")))?;
                let mut z = zip::ZipArchive::new(f).map_err(|e| bad(p, e.to_string()))?;
                let mut e = z
                    .by_name(entry)
                    .map_err(|e| bad(p, format!("{entry}: {e}")))?;
                let mut buf = vec![];
                e.read_to_end(&mut buf)
                    .map_err(|e| bad(p, format!("{entry}: {e}")))?;
                crate::model::npy::parse_npy(&format!("{}:{entry}", p.display()), &buf)
            }
            Loader::Safetensors { path, start, info } => {
                let dtype = safetensors_dtype(info.dtype).ok_or_else(|| {
                    bad(
                        path,
                        format!("element type {:?} is not compared", info.dtype),
                    )
                })?;
                let (a, b) = info.data_offsets;
                let mut f = std::fs::File::open(path)
                    .map_err(|e| bad(path, format!("cannot open it: {e}")))?;
                f.seek(SeekFrom::Start(start + a as u64))
                    .map_err(|e| bad(path, e.to_string()))?;
                let mut buf = vec![0u8; b.saturating_sub(a)];
                f.read_exact(&mut buf)
                    .map_err(|_| bad(path, "truncated tensor data"))?;
                tensor_from_le(dtype, &info.shape, &buf).map_err(|e| bad(path, e))
            }
            Loader::Torch(_, t) => {
                let bytes = t
                    .read()
                    .map_err(|e| bad(path, format!("tensor `{}`: {e}", t.name)))?;
                tensor_from_le(t.dtype(), t.shape(), &bytes)
                    .map_err(|e| bad(path, format!("tensor `{}`: {e}", t.name)))
            }
        }
    }
}
