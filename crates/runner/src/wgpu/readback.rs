//! Batched read-back of device values for the comparison: values wait until a host node reads one of them, until
//! they add up to [`READ_BATCH_BYTES`], or until the run ends, and are then read in one submission and one wait.

use super::ctx::{download, DevVal, Store};
use super::gpu::Gpu;
use crate::error::Result;
use crate::RunOutput;

/// Device values not read back yet: read in one submission and one wait when a host node needs one of them, when
/// they add up to [`READ_BATCH_BYTES`], and at the end (a wait per node costs milliseconds on some drivers).
#[derive(Default)]
pub(super) struct Pending {
    /// The values, by name, and the names alone (for [`Pending::holds`]).
    pub(super) items: Vec<(String, DevVal)>,
    pub(super) names: std::collections::HashSet<String>,
    /// Bytes the values take on the device.
    pub(super) bytes: u64,
    /// The nodes that computed them, "name (op)", for the error of a failed read.
    pub(super) nodes: Vec<String>,
}

/// Bytes of pending values beyond which they are read back before the next node.
pub(super) const READ_BATCH_BYTES: u64 = 256 << 20;

impl Pending {
    /// Whether value `name` waits to be read back.
    pub(super) fn holds(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Reads the pending values back into `out`; those a later node still reads on the host (`needed`) are also kept
    /// in the store.
    pub(super) fn flush(
        &mut self,
        gpu: &Gpu,
        store: &mut Store,
        out: &mut RunOutput,
        needed: &dyn Fn(&str) -> bool,
    ) -> Result<()> {
        if self.items.is_empty() {
            return Ok(());
        }
        let bufs: Vec<_> = self
            .items
            .iter()
            .map(|(_, v)| (&*v.buf, v.bytes(gpu.mode)))
            .collect();
        let bytes = gpu.read(&bufs)?;
        let nodes = std::mem::take(&mut self.nodes);
        let what = match nodes.len() {
            1 => format!("node {}", nodes[0]),
            n => format!("one of {n} nodes {} … {}", nodes[0], nodes[n - 1]),
        };
        gpu.check(&what)?;
        self.names.clear();
        for ((name, v), b) in std::mem::take(&mut self.items).into_iter().zip(bytes) {
            let t = download(gpu, &v, &b);
            if needed(&name) {
                store.host.insert(name.clone(), t.clone());
            }
            out.values.insert(name, t);
        }
        self.bytes = 0;
        Ok(())
    }
}
