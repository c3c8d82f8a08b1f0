//! Values spilled to disk: the reference values attribution reads again later, and the expected-noise run's, when a
//! run is bounded in memory. A store appends each value's raw elements to one file in a private temporary directory
//! (under `PHANTOM_SPILL_DIR`, else the system's temporary directory), removed when the store is dropped; shapes and types
//! stay in memory. [`Values`] reads values by name the same way from memory or from disk, so the stages that read
//! them again (introduced error, causes, the fusion check) work on either.

pub mod arrivals;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use half::slice::HalfFloatSliceExt;
use ndarray::ArrayD;

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// Values by name, read from wherever they are kept.
pub trait Values: Sync {
    /// The value, borrowed when it is in memory, read back when it is on disk.
    fn tensor(&self, name: &str) -> Option<Cow<'_, Tensor>>;
    /// Whether the value is kept.
    fn has(&self, name: &str) -> bool;
    /// Bytes of its elements (0 when absent).
    fn nbytes(&self, name: &str) -> usize;
    /// Its element type.
    fn dtype(&self, name: &str) -> Option<DType>;
}

impl Values for HashMap<String, Tensor> {
    fn tensor(&self, name: &str) -> Option<Cow<'_, Tensor>> {
        self.get(name).map(Cow::Borrowed)
    }
    fn has(&self, name: &str) -> bool {
        self.contains_key(name)
    }
    fn nbytes(&self, name: &str) -> usize {
        self.get(name).map_or(0, Tensor::nbytes)
    }
    fn dtype(&self, name: &str) -> Option<DType> {
        self.get(name).map(Tensor::dtype)
    }
}

/// Where spill directories go: `PHANTOM_SPILL_DIR`, else the system's temporary directory.
pub fn root() -> PathBuf {
    std::env::var_os("PHANTOM_SPILL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// Bytes free for an unprivileged writer on the filesystem holding `dir` (`None` where that cannot be read).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a valid NUL-terminated path and `st` a zeroed statvfs that the call fills.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// One spilled value: where its elements start in the store's file, its type and shape.
struct Entry {
    offset: u64,
    dtype: DType,
    shape: Vec<usize>,
}

impl Entry {
    fn len(&self) -> u64 {
        (self.shape.iter().product::<usize>() * self.dtype.size()) as u64
    }
}

/// Values on disk, appended to one file of raw elements in a temporary directory removed on drop. One file, not
/// one per value: creating thousands of files (a 6,261-node model spills each value) cost a third of a bounded
/// run's time in ext4's inode allocation on this machine.
pub struct Spill {
    dir: tempfile::TempDir,
    file: std::fs::File,
    index: HashMap<String, Entry>,
    /// Where the next value goes.
    end: u64,
    /// Bytes written so far.
    pub bytes: u64,
}

impl Spill {
    /// A new, empty store under [`root`]; `what` names it in the directory's name.
    pub fn new(what: &str) -> Result<Spill> {
        let root = root();
        let dir = tempfile::Builder::new()
            .prefix(&format!("phantom-{what}-"))
            .tempdir_in(&root)
            .map_err(|e| spill_error(&root, e))?;
        let path = dir.path().join("values.raw");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| spill_error(&path, e))?;
        Ok(Spill {
            dir,
            file,
            index: HashMap::new(),
            end: 0,
            bytes: 0,
        })
    }

    /// The directory the values are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `t` as `name` (replacing an earlier value of that name).
    pub fn put(&mut self, name: &str, t: &Tensor) -> Result<()> {
        let offset = self.end;
        write_elements(&self.file, offset, t).map_err(|e| spill_error(&self.path(), e))?;
        let entry = Entry {
            offset,
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
        };
        self.end += entry.len();
        self.bytes += entry.len();
        if let Some(old) = self.index.insert(name.to_string(), entry) {
            self.release(&old);
        }
        Ok(())
    }

    /// Reads `name` back; `None` when it was not spilled (or cannot be read, which is said on stderr).
    pub fn get(&self, name: &str) -> Option<Tensor> {
        let e = self.index.get(name)?;
        match read_elements(&self.file, e.offset, e.dtype, &e.shape) {
            Ok(t) => Some(t),
            Err(err) => {
                eprintln!(
                    "phantom: cannot read back spilled value `{name}` from {}: {err}",
                    self.path().display()
                );
                None
            }
        }
    }

    /// Reads `name` back and forgets it, giving its bytes back to the disk.
    pub fn take(&mut self, name: &str) -> Option<Tensor> {
        let t = self.get(name);
        if let Some(e) = self.index.remove(name) {
            self.release(&e);
        }
        t
    }

    /// Gives a forgotten value's bytes back to the filesystem (a hole punched in the file, where it can): whether
    /// it did. Where it cannot (a filesystem without holes), the bytes stay until the store is dropped.
    fn release(&self, e: &Entry) -> bool {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let (off, len) = (e.offset as libc::off_t, e.len() as libc::off_t);
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: a valid open descriptor and a byte range of it.
            unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off, len) == 0 }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = e;
            false
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("values.raw")
    }
}

impl Values for Spill {
    fn tensor(&self, name: &str) -> Option<Cow<'_, Tensor>> {
        self.get(name).map(Cow::Owned)
    }
    fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
    fn nbytes(&self, name: &str) -> usize {
        self.index
            .get(name)
            .map_or(0, |e| e.shape.iter().product::<usize>() * e.dtype.size())
    }
    fn dtype(&self, name: &str) -> Option<DType> {
        self.index.get(name).map(|e| e.dtype)
    }
}

/// A write to or read from a spill directory failed: say where, and how to put it elsewhere.
fn spill_error(path: &Path, e: std::io::Error) -> Error {
    Error::Usage(format!(
        "spilling values to disk at {}: {e}; a bounded run keeps values there (up to about 1.5x the f64 size of the \
         model's values): set PHANTOM_SPILL_DIR to a writable directory on a disk with room",
        path.display()
    ))
}

/// Writes the elements of `t` in native byte order at `offset` of `f`.
fn write_elements(f: &std::fs::File, offset: u64, t: &Tensor) -> std::io::Result<()> {
    macro_rules! raw {
        ($a:expr) => {{
            let a = $a.as_standard_layout();
            write_at(
                f,
                bytemuck::cast_slice(a.as_slice().expect("standard layout")),
                offset,
            )
        }};
    }
    match t {
        Tensor::F64(a) => raw!(a),
        Tensor::F32(a) => raw!(a),
        Tensor::F16(a) => {
            let a = a.as_standard_layout();
            let bits: &[u16] = a.as_slice().expect("standard layout").reinterpret_cast();
            write_at(f, bytemuck::cast_slice(bits), offset)
        }
        Tensor::Bf16(a) => {
            let a = a.as_standard_layout();
            let bits: &[u16] = a.as_slice().expect("standard layout").reinterpret_cast();
            write_at(f, bytemuck::cast_slice(bits), offset)
        }
        Tensor::I64(a) => raw!(a),
        Tensor::I32(a) => raw!(a),
        Tensor::I16(a) => raw!(a),
        Tensor::I8(a) => raw!(a),
        Tensor::U64(a) => raw!(a),
        Tensor::U32(a) => raw!(a),
        Tensor::U16(a) => raw!(a),
        Tensor::U8(a) => raw!(a),
        Tensor::Bool(a) => {
            let bytes = a.mapv(u8::from);
            raw!(bytes)
        }
        Tensor::Str(_) => Err(std::io::Error::other("string values are not spilled")),
    }
}

/// Reads `shape`'s elements of `dtype` at `offset` of `f`, written by [`write_elements`].
fn read_elements(
    f: &std::fs::File,
    offset: u64,
    dtype: DType,
    shape: &[usize],
) -> std::io::Result<Tensor> {
    let n: usize = shape.iter().product();
    macro_rules! read {
        ($t:ty) => {{
            let mut v: Vec<$t> = vec![<$t>::default(); n];
            read_at(f, bytemuck::cast_slice_mut(&mut v), offset)?;
            ArrayD::from_shape_vec(shape.to_vec(), v).map_err(std::io::Error::other)?
        }};
    }
    Ok(match dtype {
        DType::F64 => Tensor::F64(read!(f64)),
        DType::F32 => Tensor::F32(read!(f32)),
        DType::F16 => Tensor::F16(read!(u16).mapv(half::f16::from_bits)),
        DType::Bf16 => Tensor::Bf16(read!(u16).mapv(half::bf16::from_bits)),
        DType::I64 => Tensor::I64(read!(i64)),
        DType::I32 => Tensor::I32(read!(i32)),
        DType::I16 => Tensor::I16(read!(i16)),
        DType::I8 => Tensor::I8(read!(i8)),
        DType::U64 => Tensor::U64(read!(u64)),
        DType::U32 => Tensor::U32(read!(u32)),
        DType::U16 => Tensor::U16(read!(u16)),
        DType::U8 => Tensor::U8(read!(u8)),
        DType::Bool => Tensor::Bool(read!(u8).mapv(|b| b != 0)),
        DType::String | DType::Other => {
            return Err(std::io::Error::other(format!(
                "{dtype} values are not spilled"
            )))
        }
    })
}

/// Writes all of `buf` at `offset` (positional: the file's cursor is not used).
#[cfg(unix)]
fn write_at(f: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, offset)
}

/// Fills `buf` from `offset` (positional, so readers on several threads need no lock).
#[cfg(unix)]
fn read_at(f: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}

/// Writes all of `buf` at `offset`.
#[cfg(windows)]
fn write_at(f: &std::fs::File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(f, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        (buf, offset) = (&buf[n..], offset + n as u64);
    }
    Ok(())
}

/// Fills `buf` from `offset`.
#[cfg(windows)]
fn read_at(f: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(f, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        (buf, offset) = (&mut buf[n..], offset + n as u64);
    }
    Ok(())
}

/// Reference values kept for the stages that read them again: in memory, or spilled to disk (bounded memory).
pub enum Held {
    Memory(HashMap<String, Tensor>),
    Disk(Spill),
    /// Values a run on another thread is computing, taken as they arrive.
    Arriving(std::sync::Arc<crate::spill::arrivals::Arrivals>),
}

impl Default for Held {
    fn default() -> Self {
        Held::Memory(HashMap::new())
    }
}

impl Held {
    /// Keeps `t` as `name`.
    pub fn insert(&mut self, name: &str, t: Tensor) -> Result<()> {
        match self {
            Held::Memory(m) => {
                m.insert(name.to_string(), t);
                Ok(())
            }
            Held::Disk(s) => s.put(name, &t),
            Held::Arriving(a) => {
                a.put(name, Some(t));
                Ok(())
            }
        }
    }

    /// Keeps a copy of `t` as `name` (on disk, written without a copy in memory).
    pub fn keep(&mut self, name: &str, t: &Tensor) -> Result<()> {
        match self {
            Held::Memory(m) => {
                m.insert(name.to_string(), t.clone());
                Ok(())
            }
            Held::Disk(s) => s.put(name, t),
            Held::Arriving(a) => {
                a.put(name, Some(t.clone()));
                Ok(())
            }
        }
    }

    /// Gives `name` up: the value, then forgotten.
    pub fn take(&mut self, name: &str) -> Option<Tensor> {
        match self {
            Held::Memory(m) => m.remove(name),
            Held::Disk(s) => s.take(name),
            Held::Arriving(a) => a.take(name),
        }
    }

    /// Bytes of values spilled to disk (None when they wait in memory).
    pub fn spilled_bytes(&self) -> Option<u64> {
        match self {
            Held::Memory(_) => None,
            Held::Disk(s) => Some(s.bytes),
            Held::Arriving(a) => Some(a.spilled_bytes()),
        }
    }

    /// The spill store, when the values are on disk.
    pub fn spilled(&self) -> Option<&Spill> {
        match self {
            Held::Memory(_) | Held::Arriving(_) => None,
            Held::Disk(s) => Some(s),
        }
    }
}

impl Values for Held {
    fn tensor(&self, name: &str) -> Option<Cow<'_, Tensor>> {
        match self {
            Held::Memory(m) => m.tensor(name),
            Held::Disk(s) => s.tensor(name),
            Held::Arriving(a) => {
                a.read(name, |h| h.tensor(name).map(|t| Cow::Owned(t.into_owned())))
            }
        }
    }
    fn has(&self, name: &str) -> bool {
        match self {
            Held::Memory(m) => m.has(name),
            Held::Disk(s) => s.has(name),
            Held::Arriving(a) => a.read(name, |h| h.has(name)),
        }
    }
    fn nbytes(&self, name: &str) -> usize {
        match self {
            Held::Memory(m) => m.nbytes(name),
            Held::Disk(s) => s.nbytes(name),
            Held::Arriving(a) => a.read(name, |h| h.nbytes(name)),
        }
    }
    fn dtype(&self, name: &str) -> Option<DType> {
        match self {
            Held::Memory(m) => m.dtype(name),
            Held::Disk(s) => s.dtype(name),
            Held::Arriving(a) => a.read(name, |h| h.dtype(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_back_as_written() {
        let shape = ndarray::IxDyn(&[2, 3]);
        let f = ArrayD::from_shape_fn(shape.clone(), |i| i[0] as f64 * 3.0 + i[1] as f64 - 2.5);
        let mut values = vec![Tensor::F64(f.clone())];
        for d in [
            DType::F32,
            DType::F16,
            DType::Bf16,
            DType::I64,
            DType::I8,
            DType::U8,
        ] {
            values.push(Tensor::from_f64(d, f.clone()).expect("cast"));
        }
        values.push(Tensor::Bool(f.mapv(|v| v > 0.0)));
        // A transposed view: written in logical order.
        values.push(Tensor::F32(f.mapv(|v| v as f32).reversed_axes()));
        let mut s = Spill::new("test").unwrap();
        for (k, t) in values.iter().enumerate() {
            s.put(&k.to_string(), t).unwrap();
        }
        for (k, t) in values.iter().enumerate() {
            let back = s.get(&k.to_string()).unwrap();
            assert_eq!(back.dtype(), t.dtype());
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.to_f64_array(), t.to_f64_array(), "value {k}");
        }
        let dir = s.dir().to_path_buf();
        assert!(s.take("0").is_some() && !s.has("0"));
        // A value given up gives its disk space back (a hole in the one file), on Linux.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            let big = Tensor::F64(ArrayD::zeros(ndarray::IxDyn(&[1 << 18])));
            s.put("big", &big).unwrap();
            let used = || std::fs::metadata(dir.join("values.raw")).unwrap().blocks() * 512;
            let before = used();
            assert!(before >= 2 << 20, "{before} bytes on disk");
            let punched = s.release(&s.index["big"]);
            s.index.remove("big");
            // Where the filesystem punches holes, the space is back.
            assert!(
                !punched || used() + (1 << 20) <= before,
                "{} of {before} bytes still on disk",
                used()
            );
        }
        // A value replaced or taken leaves the others readable where they are.
        s.put("1", &values[0]).unwrap();
        assert_eq!(s.get("1").unwrap().to_f64_array(), f);
        assert_eq!(s.get("2").unwrap().dtype(), DType::F16);
        drop(s);
        assert!(!dir.exists(), "the spill directory is removed on drop");
    }
}
