//! Values spilled to disk: the reference values attribution reads again later, and the expected-noise run's, when a
//! run is bounded in memory. A store appends each value's raw elements to one file in a private temporary directory
//! (under `PHANTOM_SPILL_DIR`, else the system's temporary directory), removed when the store is dropped; shapes and types
//! stay in memory. [`Values`] reads values by name the same way from memory or from disk, so the stages that read
//! them again (introduced error, causes, the fusion check) work on either.

pub mod arrivals;
mod raw;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};
use raw::{read_elements, write_elements};

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
    /// Bytes kept in memory instead, so far.
    pub held: u64,
    /// Values kept in memory instead of written ([`Spill::with_memory`]).
    front: Front,
}

/// Values a store keeps in memory instead of writing them, up to `cap` bytes at a time: values taken soon after they
/// are put (the expected-noise run's, read as the comparison reaches them) then never touch the disk.
#[derive(Default)]
struct Front {
    values: HashMap<String, Tensor>,
    bytes: usize,
    cap: usize,
}

impl Front {
    fn fits(&self, t: &Tensor) -> bool {
        self.bytes.saturating_add(t.nbytes()) <= self.cap
    }

    fn insert(&mut self, name: &str, t: Tensor) {
        self.bytes += t.nbytes();
        if let Some(old) = self.values.insert(name.to_string(), t) {
            self.bytes -= old.nbytes();
        }
    }

    fn remove(&mut self, name: &str) -> Option<Tensor> {
        let t = self.values.remove(name)?;
        self.bytes -= t.nbytes();
        Some(t)
    }
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
            held: 0,
            front: Front::default(),
        })
    }

    /// The store keeping values in memory while they take at most `cap` bytes at a time, writing only those beyond.
    pub fn with_memory(mut self, cap: usize) -> Spill {
        self.front.cap = cap;
        self
    }

    /// The directory the values are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps `t` as `name` (replacing an earlier value of that name): in memory while there is room, else on disk.
    pub fn put_owned(&mut self, name: &str, t: Tensor) -> Result<()> {
        match self.front.fits(&t) {
            true => {
                self.forget(name);
                self.held += t.nbytes() as u64;
                self.front.insert(name, t);
                Ok(())
            }
            false => self.put(name, &t),
        }
    }

    /// Keeps a copy of `t` as `name` (replacing an earlier value of that name): in memory while there is room, else
    /// written to disk.
    pub fn put(&mut self, name: &str, t: &Tensor) -> Result<()> {
        if self.front.fits(t) {
            return self.put_owned(name, t.clone());
        }
        self.front.remove(name);
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
        if let Some(t) = self.front.values.get(name) {
            return Some(t.clone());
        }
        self.read(name)
    }

    /// Reads `name` back from disk.
    fn read(&self, name: &str) -> Option<Tensor> {
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
        if let Some(t) = self.front.remove(name) {
            return Some(t);
        }
        let t = self.read(name);
        self.forget(name);
        t
    }

    /// Forgets `name` wherever it is kept.
    fn forget(&mut self, name: &str) {
        self.front.remove(name);
        if let Some(e) = self.index.remove(name) {
            self.release(&e);
        }
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
        match self.front.values.get(name) {
            Some(t) => Some(Cow::Borrowed(t)),
            None => self.read(name).map(Cow::Owned),
        }
    }
    fn has(&self, name: &str) -> bool {
        self.front.values.contains_key(name) || self.index.contains_key(name)
    }
    fn nbytes(&self, name: &str) -> usize {
        if let Some(t) = self.front.values.get(name) {
            return t.nbytes();
        }
        self.index
            .get(name)
            .map_or(0, |e| e.shape.iter().product::<usize>() * e.dtype.size())
    }
    fn dtype(&self, name: &str) -> Option<DType> {
        if let Some(t) = self.front.values.get(name) {
            return Some(t.dtype());
        }
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

/// Where the values of a store that may spill waited: bytes kept in memory, bytes written to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    pub memory: u64,
    pub disk: u64,
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
            Held::Disk(s) => s.put_owned(name, t),
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

    /// Bytes of values a store that may spill kept in memory and wrote to disk (None for a store in memory only).
    pub fn spilled_bytes(&self) -> Option<Kept> {
        match self {
            Held::Memory(_) => None,
            Held::Disk(s) => Some(Kept {
                memory: s.held,
                disk: s.bytes,
            }),
            Held::Arriving(a) => a.spilled_bytes(),
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
    use ndarray::ArrayD;

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

    #[test]
    fn values_wait_in_memory_up_to_the_cap_and_on_disk_beyond() {
        let value = |x: f64| Tensor::F64(ArrayD::from_elem(ndarray::IxDyn(&[4]), x));
        let mut s = Spill::new("test").unwrap().with_memory(64);
        s.put_owned("a", value(1.0)).unwrap();
        s.put("b", &value(2.0)).unwrap();
        // 64 bytes are held: the third value goes to disk.
        s.put_owned("c", value(3.0)).unwrap();
        assert_eq!((s.held, s.bytes), (64, 32));
        assert!(s.has("a") && s.has("c") && s.nbytes("c") == 32);
        assert_eq!(s.take("a").unwrap().to_f64_array()[0], 1.0);
        assert!(!s.has("a"));
        // Taking one frees its room: the next value is held again, and replacing one on disk forgets the old copy.
        s.put_owned("c", value(4.0)).unwrap();
        assert_eq!((s.held, s.bytes), (96, 32));
        assert_eq!(s.tensor("c").unwrap().to_f64_array()[0], 4.0);
        assert!(s.index.is_empty());
        assert_eq!(s.take("b").unwrap().to_f64_array()[0], 2.0);
        assert_eq!(s.get("c").unwrap().to_f64_array()[0], 4.0);
    }
}
