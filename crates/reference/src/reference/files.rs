//! The model's own external data as tract reads it: memory-mapped where the file system allows, read where it does
//! not (sysfs, some network and FUSE file systems refuse `mmap` with "No such device"), and every failure naming the
//! file and what was being read.

use std::path::Path;

use tract_onnx::data_resolver::{FopenDataResolver, MmapDataResolver, ModelDataResolver};
use tract_onnx::prelude::{TractError, TractResult};

/// tract's data resolver for external data files: mapped, else read.
pub struct Files;

impl ModelDataResolver for Files {
    fn read_bytes_from_path(
        &self,
        buf: &mut Vec<u8>,
        p: &Path,
        offset: usize,
        length: Option<usize>,
    ) -> TractResult<()> {
        let start = buf.len();
        let Err(mapped) = MmapDataResolver.read_bytes_from_path(buf, p, offset, length) else {
            return Ok(());
        };
        buf.truncate(start);
        FopenDataResolver
            .read_bytes_from_path(buf, p, offset, length)
            .map_err(|read| {
                let range = match length {
                    Some(n) => format!("{n} bytes at offset {offset}"),
                    None => format!("from offset {offset} to its end"),
                };
                TractError::msg(format!(
                    "reading external data {} ({range}): mapping it failed ({mapped:#}), and so did reading it \
                     ({read:#}); check that the file is the one the model was saved with",
                    p.display()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_cannot_be_mapped_is_read() {
        // sysfs refuses mmap with ENODEV (os error 19), the bare error a user once saw.
        let p = Path::new("/sys/devices/system/cpu/online");
        if !p.exists() {
            return;
        }
        let mut direct = Vec::new();
        assert!(MmapDataResolver
            .read_bytes_from_path(&mut direct, p, 0, Some(1))
            .is_err_and(|e| e.to_string().contains("os error 19")));
        let mut buf = Vec::new();
        Files.read_bytes_from_path(&mut buf, p, 0, Some(1)).unwrap();
        assert_eq!(buf, std::fs::read(p).unwrap()[..1]);
    }

    #[test]
    fn a_failure_names_the_file_and_the_range() {
        let dir = std::env::temp_dir();
        let mut buf = Vec::new();
        let e = Files
            .read_bytes_from_path(&mut buf, &dir, 16, Some(8))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&dir.display().to_string()), "{e}");
        assert!(e.contains("8 bytes at offset 16"), "{e}");
    }
}
