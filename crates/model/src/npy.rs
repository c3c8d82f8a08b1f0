//! NumPy `.npy` and `.npz` reading and writing for the element types phantom handles.

use std::io::{Read, Write};
use std::path::Path;

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

fn bad(name: &str, reason: impl Into<String>) -> Error {
    Error::Input {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn header_field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Parses `.npy` bytes; `name` is used in errors.
pub fn parse_npy(name: &str, bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad(name, "not a .npy file (missing the \\x93NUMPY magic)"));
    }
    let (hlen, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(bad(name, "truncated .npy header")),
    };
    let header = bytes
        .get(start..start.saturating_add(hlen))
        .ok_or_else(|| bad(name, "truncated .npy header"))?;
    let header = String::from_utf8_lossy(header);
    let descr = header_field(&header, "descr")
        .and_then(|r| r.strip_prefix('\'').and_then(|r| r.split('\'').next()))
        .ok_or_else(|| bad(name, "the .npy header has no descr"))?;
    if header_field(&header, "fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(
            name,
            "Fortran-ordered arrays are not supported: save with np.ascontiguousarray",
        ));
    }
    let shape_txt = header_field(&header, "shape")
        .and_then(|r| r.strip_prefix('(').and_then(|r| r.split(')').next()))
        .ok_or_else(|| bad(name, "the .npy header has no shape"))?;
    let shape: Vec<usize> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| bad(name, format!("bad shape ({shape_txt})")))
        })
        .collect::<Result<_>>()?;
    let data = &bytes[start + hlen..];
    if descr.starts_with('>') {
        return Err(bad(name, "big-endian arrays are not supported: save with arr.astype(arr.dtype.newbyteorder('<'))"));
    }
    let kind = descr.trim_start_matches(['<', '|', '=']);
    if let Some(chars) = kind.strip_prefix('U') {
        return unicode(name, &shape, chars, data);
    }
    let size = match kind {
        "f8" | "i8" | "u8" => 8,
        "f4" | "i4" | "u4" => 4,
        "f2" | "i2" | "u2" | "V2" => 2,
        "i1" | "u1" | "b1" => 1,
        _ => return Err(bad(name, format!("unsupported .npy dtype `{descr}`"))),
    };
    let need = crate::tensor::checked_nbytes(&shape, size).ok_or_else(|| {
        bad(
            name,
            format!("its shape {shape:?} has more elements than can be addressed"),
        )
    })?;
    if data.len() < need {
        return Err(bad(
            name,
            format!(
                "holds {} bytes of data, its shape {shape:?} needs {need}",
                data.len()
            ),
        ));
    }
    let data = &data[..need];
    fn arr<T>(shape: &[usize], v: Vec<T>) -> ArrayD<T> {
        ArrayD::from_shape_vec(IxDyn(shape), v).expect("length checked")
    }
    macro_rules! le {
        ($t:ty) => {
            arr(
                &shape,
                data.chunks_exact(size)
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        };
    }
    Ok(match kind {
        "f8" => Tensor::F64(le!(f64)),
        "f4" => Tensor::F32(le!(f32)),
        "f2" => Tensor::F16(le!(u16).mapv(f16::from_bits)),
        "V2" => Tensor::Bf16(le!(u16).mapv(bf16::from_bits)),
        "i8" => Tensor::I64(le!(i64)),
        "i4" => Tensor::I32(le!(i32)),
        "i2" => Tensor::I16(le!(i16)),
        "i1" => Tensor::I8(le!(i8)),
        "u8" => Tensor::U64(le!(u64)),
        "u4" => Tensor::U32(le!(u32)),
        "u2" => Tensor::U16(le!(u16)),
        "u1" => Tensor::U8(le!(u8)),
        _ => Tensor::Bool(arr(&shape, data.iter().map(|&b| b != 0).collect())),
    })
}

/// Reads a `.npy` file.
pub fn read_npy(path: &Path) -> Result<Tensor> {
    let limit = crate::fsutil::input_budget() as u64;
    parse_npy(
        &path.display().to_string(),
        &crate::error::read_bounded(path, limit, ".npy input")?,
    )
}

/// Reads every array of a `.npz` archive, keyed by name (without `.npy`).
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let shown = path.display().to_string();
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| bad(&shown, format!("not a .npz archive: {e}")))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(&shown, e.to_string()))?;
        let name = entry.name().trim_end_matches(".npy").to_string();
        let limit = crate::fsutil::input_budget() as u64;
        if entry.size() > limit {
            return Err(bad(
                &shown,
                format!("entry `{name}` unpacks to {} bytes, more than phantom reads for inputs ({limit})", entry.size()),
            ));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(&shown, format!("entry `{name}`: {e}")))?;
        if bytes.len() as u64 > limit {
            return Err(bad(
                &shown,
                format!("entry `{name}` unpacks beyond its declared size (a zip bomb?)"),
            ));
        }
        out.push((name.clone(), parse_npy(&format!("{shown}:{name}"), &bytes)?));
    }
    Ok(out)
}

/// A numpy unicode array (`<U{chars}`: UTF-32LE code points, each element `chars` wide, zero-padded).
fn unicode(name: &str, shape: &[usize], chars: &str, data: &[u8]) -> Result<Tensor> {
    let width: usize = chars
        .parse()
        .map_err(|_| bad(name, format!("bad unicode width `U{chars}`")))?;
    let too_many = || {
        bad(
            name,
            format!("its shape {shape:?} has more elements than can be addressed"),
        )
    };
    let count = crate::tensor::checked_nbytes(shape, 1).ok_or_else(too_many)?;
    let need = count
        .checked_mul(width.saturating_mul(4))
        .ok_or_else(too_many)?;
    let data = data.get(..need).ok_or_else(|| {
        bad(
            name,
            format!(
                "holds {} bytes of data, its shape {shape:?} needs {need}",
                data.len()
            ),
        )
    })?;
    let element = |k: usize| -> Result<String> {
        (data[k * width * 4..(k + 1) * width * 4].chunks_exact(4))
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .take_while(|&u| u != 0)
            .map(|u| {
                char::from_u32(u).ok_or_else(|| bad(name, format!("invalid code point {u:#x}")))
            })
            .collect()
    };
    let strings = (0..count).map(element).collect::<Result<Vec<_>>>()?;
    Ok(Tensor::Str(
        ArrayD::from_shape_vec(IxDyn(shape), strings).map_err(|e| bad(name, e.to_string()))?,
    ))
}

/// A string tensor as a numpy unicode array (`<U{widest}`).
fn unicode_npy(s: &ArrayD<String>) -> (String, Vec<u8>) {
    let width = s
        .iter()
        .map(|x| x.chars().count())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut data = Vec::with_capacity(s.len() * width * 4);
    for x in s.iter() {
        let n = x.chars().count();
        data.extend(x.chars().flat_map(|c| (c as u32).to_le_bytes()));
        data.extend(std::iter::repeat_n(0u8, (width - n) * 4));
    }
    (format!("<U{width}"), data)
}

/// Serializes a tensor as `.npy` bytes (bf16 is written as the 2-byte void type `V2`, strings as `<U`).
pub fn to_npy(t: &Tensor) -> Vec<u8> {
    let unicode = t.strings().map(unicode_npy);
    let descr = match t {
        Tensor::Str(_) => unicode.as_ref().map_or("<U1", |u| u.0.as_str()),
        Tensor::F64(_) => "<f8",
        Tensor::F32(_) => "<f4",
        Tensor::F16(_) => "<f2",
        Tensor::Bf16(_) => "|V2",
        Tensor::I64(_) => "<i8",
        Tensor::I32(_) => "<i4",
        Tensor::I16(_) => "<i2",
        Tensor::I8(_) => "|i1",
        Tensor::U64(_) => "<u8",
        Tensor::U32(_) => "<u4",
        Tensor::U16(_) => "<u2",
        Tensor::U8(_) => "|u1",
        Tensor::Bool(_) => "|b1",
    };
    let shape = t
        .shape()
        .iter()
        .map(|d| format!("{d},"))
        .collect::<String>();
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({shape}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match unicode {
        Some((_, data)) => out.extend_from_slice(&data),
        None => out.extend_from_slice(&crate::proto::tensor_to_proto("", t).raw_data),
    }
    out
}

/// Writes a `.npy` file.
pub fn write_npy(path: &Path, t: &Tensor) -> Result<()> {
    let fail = |e: std::io::Error| Error::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut f = std::fs::File::create(path).map_err(fail)?;
    f.write_all(&to_npy(t)).map_err(fail)
}
