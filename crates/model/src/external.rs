//! Derived models that keep their weights in an external-data file, as the model they come from does. A converted
//! model (fp16/bf16) is encoded whole before ONNX Runtime loads it, and protobuf caps a message at 2 GiB: a
//! converted decoder of a billion parameters does not fit inline. [`externalize`] writes every sizeable
//! initializer to one data file beside the derived model (in a temporary directory phantom owns), so the derived
//! model stays a few kilobytes and needs nothing of the original's directory; [`save`] writes such a model and its
//! data to where the user asked.

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;
use tract_onnx::pb::{tensor_proto::DataLocation, ModelProto, StringStringEntryProto};

use crate::error::{Error, Result};
use crate::proto::stored_bytes;

/// Initializers of fewer bytes stay inline.
pub const MIN_EXTERNAL: usize = 1024;

/// The data file of the model at `model`: `<file name>.data` beside it.
pub fn data_path(model: &Path) -> PathBuf {
    let mut name = model.file_name().unwrap_or_default().to_os_string();
    name.push(".data");
    model.with_file_name(name)
}

/// Moves every initializer of `proto`'s main graph of at least [`MIN_EXTERNAL`] stored bytes (inline, or in
/// external data beside `base`) into [`data_path`]`(model)`, which it (re)writes. Returns the bytes written.
pub fn externalize(proto: &mut ModelProto, base: Option<&Path>, model: &Path) -> Result<u64> {
    let path = data_path(model);
    let location = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let fail = |e: std::io::Error| Error::Write {
        path: path.clone(),
        reason: e.to_string(),
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(fail)?);
    let mut offset = 0u64;
    for t in proto
        .graph
        .iter_mut()
        .flat_map(|g| g.initializer.iter_mut())
    {
        let Some(bytes) = stored_bytes(t, base)?.filter(|b| b.len() >= MIN_EXTERNAL) else {
            continue;
        };
        out.write_all(&bytes).map_err(fail)?;
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: k.into(),
            value: v,
        };
        t.external_data = vec![
            entry("location", location.clone()),
            entry("offset", offset.to_string()),
            entry("length", bytes.len().to_string()),
        ];
        t.data_location = Some(DataLocation::External as i32);
        t.raw_data.clear();
        offset += bytes.len() as u64;
    }
    out.flush().map_err(fail)?;
    Ok(offset)
}

/// Writes the derived model `bytes` (at `from`, its data file beside it if it has one) to `to`, with its data
/// copied to [`data_path`]`(to)` and the model's references renamed to match.
pub fn save(bytes: &[u8], from: &Path, to: &Path) -> Result<()> {
    let data = data_path(from);
    if !data.is_file() {
        return crate::fsutil::write_atomic(to, bytes);
    }
    let mut proto = crate::import::decode(bytes).map_err(|e| Error::MalformedModel {
        path: from.to_path_buf(),
        reason: e.to_string(),
    })?;
    let (old, new) = (file_name(&data), file_name(&data_path(to)));
    for t in proto
        .graph
        .iter_mut()
        .flat_map(|g| g.initializer.iter_mut())
    {
        for e in t.external_data.iter_mut() {
            if e.key == "location" && e.value == old {
                e.value = new.clone();
            }
        }
    }
    std::fs::copy(&data, data_path(to)).map_err(|e| Error::Write {
        path: data_path(to),
        reason: e.to_string(),
    })?;
    crate::fsutil::write_atomic(to, &proto.encode_to_vec())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string()
}
