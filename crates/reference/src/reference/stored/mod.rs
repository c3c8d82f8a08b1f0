//! Weights kept as stored. Before tract parses the model, each large float32/float16/bfloat16 initializer becomes a
//! `phantom.Stored` node holding the weight's bytes as the model stores them: memory-mapped from its external-data
//! file, or its own `raw_data` moved out of the model. Each time the plan runs the node (just before the nodes that
//! read it), it widens the bytes to f64, exactly, and tract frees the widened tensor after its last reader. The
//! reference then holds the weights in their stored type plus the widened weights in use, not every weight in f64
//! (4× an fp16 model's bytes, 2× an fp32 model's).
//!
//! Left as initializers (widened up front, as before): weights under [`MIN_BYTES`], those tract requires as float32
//! (Resize scales, quantization scales), those phantom's own LSTM/GRU read from the model, and those a subgraph
//! reads. tract ops that need a weight's value while typing (BatchNormalization's statistics) refuse a stored one:
//! the parse is then redone without stored weights, so storing never changes an outcome.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

mod op;
pub use op::{build, held};

use rayon::prelude::*;
use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};
use tract_onnx::tract_hir::internal::*;

use crate::model::proto::external_location;
use crate::model::surgery;
use crate::tensor::DType;

/// Initializers smaller than this stay in the model (shape constants and the like: passes may read them).
pub const MIN_BYTES: usize = crate::model::budget::STORED_MIN_BYTES;

/// The op type of a stored weight's node.
pub const OP: &str = "phantom.Stored";

const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;
const DOUBLE: i32 = 11;
const BFLOAT16: i32 = 16;

/// Where a stored weight's bytes are.
#[derive(Debug)]
enum Bytes {
    /// Moved out of the model's `raw_data`.
    Owned(Vec<u8>),
    /// A range of a memory-mapped external-data file.
    Mapped {
        map: Arc<memmap2::Mmap>,
        at: usize,
        len: usize,
    },
}

/// One weight as stored: its bytes, their ONNX element type, its dims, and the type its elements are rounded to
/// first (the emulated low-precision run), if any.
#[derive(Debug)]
pub struct Source {
    name: String,
    bytes: Bytes,
    data_type: i32,
    dims: Vec<usize>,
    round: Option<DType>,
}

impl Source {
    fn raw(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Owned(v) => v,
            Bytes::Mapped { map, at, len } => &map[*at..*at + *len],
        }
    }

    /// Bytes held for this weight (mapped bytes are the page cache's, counted all the same).
    pub fn stored_bytes(&self) -> usize {
        self.raw().len()
    }

    /// The weight widened to f64 (each element exactly; rounded first where the run emulates a narrower type).
    pub fn widen(&self) -> TractResult<Tensor> {
        let (size, get): (usize, fn(&[u8]) -> f64) = match self.data_type {
            FLOAT => (4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
            FLOAT16 => (2, |b| half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
            _ => (2, |b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        };
        let mut t = Tensor::zero::<f64>(&self.dims)?;
        const TILE: usize = 1 << 15;
        {
            let mut plain = t.try_as_plain_ram_mut()?;
            (plain.as_slice_mut::<f64>()?.par_chunks_mut(TILE))
                .zip(self.raw().par_chunks(TILE * size))
                .for_each(|(out, bytes)| {
                    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(size)) {
                        *o = get(b);
                    }
                    if let Some(d) = self.round {
                        crate::tensor::narrow::round_slice(out, d);
                    }
                });
        }
        self.release();
        Ok(t)
    }

    /// Drops this weight's mapped pages from the process once widened: they stay in the page cache, and the next
    /// run maps them back from there, so the process holds only the weights being widened.
    fn release(&self) {
        #[cfg(target_os = "linux")]
        if let Bytes::Mapped { map, at, len } = &self.bytes {
            // SAFETY: a read-only mapping of a file: dropped pages read back as the file's bytes on the next access
            // (by another thread too); no reference into them is held across this call by this thread.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, *at, *len)
            };
        }
    }
}

/// The weights of parses under way, by key; a parse's [`Held`] removes its own when dropped (the typed model's
/// ops keep what they use).
static SOURCES: LazyLock<Mutex<HashMap<u64, Arc<Source>>>> = LazyLock::new(Default::default);
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The weights one parse stored, registered for tract's op builder until this is dropped.
pub struct Held {
    keys: Vec<u64>,
    /// Their bytes as stored.
    pub bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut s) = SOURCES.lock() {
            for k in &self.keys {
                s.remove(k);
            }
        }
    }
}

/// The float32/float16/bfloat16 initializers of `g` that can be kept as stored: at least [`MIN_BYTES`], their
/// elements in `raw_data`, a typed field or external data, of the right length, not named in `keep`, and read by no
/// subgraph.
fn eligible(g: &GraphProto, keep: &HashSet<String>) -> Vec<usize> {
    let in_bodies = names_read_in_bodies(g);
    (g.initializer.iter().enumerate())
        .filter(|(_, t)| matches!(t.data_type, FLOAT | FLOAT16 | BFLOAT16))
        .filter(|(_, t)| !keep.contains(&t.name) && !in_bodies.contains(t.name.as_str()))
        .filter(|(_, t)| {
            let size = if t.data_type == FLOAT { 4 } else { 2 };
            let elems = t.dims.iter().try_fold(1usize, |acc, &d| {
                usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
            });
            let need = elems.and_then(|e| e.checked_mul(size));
            let external = t.data_location == Some(1);
            let have = match (external, t.raw_data.is_empty()) {
                (true, _) => need,
                (false, false) => Some(t.raw_data.len()),
                // Elements in a typed field (float_data, or int32_data for 16-bit floats), as onnx.helper writes them.
                (false, true) if t.data_type == FLOAT => Some(t.float_data.len() * 4),
                (false, true) => Some(t.int32_data.len() * 2),
            };
            need.is_some_and(|n| n >= MIN_BYTES && have == Some(n))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Every value name a node inside a subgraph of `g` reads.
fn names_read_in_bodies(g: &GraphProto) -> HashSet<&str> {
    fn walk<'a>(g: &'a GraphProto, out: &mut HashSet<&'a str>) {
        for n in &g.node {
            for a in &n.attribute {
                for sub in a.g.iter().chain(a.graphs.iter()) {
                    out.extend(
                        sub.node
                            .iter()
                            .flat_map(|m| m.input.iter().map(String::as_str)),
                    );
                    walk(sub, out);
                }
            }
        }
    }
    let mut out = HashSet::new();
    walk(g, &mut out);
    out
}

/// Moves the large float weights of `g` (the top graph, not yet widened) out of the model into stored-weight nodes
/// ([`OP`]), except those `keep` names; each is rounded to the type `round` names for it, if any. External data is
/// resolved against `base` and memory-mapped. `None` where no weight qualifies.
pub fn take(
    g: &mut GraphProto,
    keep: &HashSet<String>,
    base: Option<&Path>,
    round: Option<&super::Rounding>,
) -> Option<Held> {
    let picked = eligible(g, keep);
    let mut maps: HashMap<PathBuf, Option<Arc<memmap2::Mmap>>> = HashMap::new();
    let mut held = Held {
        keys: vec![],
        bytes: 0,
    };
    let mut taken = HashSet::new();
    let mut nodes = vec![];
    for i in picked {
        let t = &mut g.initializer[i];
        let Some(bytes) = bytes_of(t, base, &mut maps) else {
            continue;
        };
        let source = Source {
            name: t.name.clone(),
            bytes,
            data_type: t.data_type,
            dims: t.dims.iter().map(|&d| d as usize).collect(),
            round: round.and_then(|r| r.get(&t.name).copied()),
        };
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        held.bytes += source.stored_bytes() as u64;
        nodes.push(node(&source, key));
        // The weight's type and shape (float64), for the passes that read declared ranks.
        g.value_info.push(surgery::value_info(
            &source.name,
            DOUBLE,
            Some(source.dims.clone()),
        ));
        SOURCES.lock().ok()?.insert(key, Arc::new(source));
        held.keys.push(key);
        taken.insert(i);
    }
    if taken.is_empty() {
        return None;
    }
    let names: HashSet<String> = taken
        .iter()
        .map(|&i| g.initializer[i].name.clone())
        .collect();
    let mut k = 0;
    g.initializer.retain(|_| {
        k += 1;
        !taken.contains(&(k - 1))
    });
    // IR 3 lists every initializer among the graph inputs: a stored weight is computed, not fed.
    g.input.retain(|i| !names.contains(&i.name));
    nodes.append(&mut g.node);
    g.node = nodes;
    Some(held)
}

/// `t`'s bytes as stored: its `raw_data` moved out (or its typed field encoded as those bytes), or its external range
/// mapped (one map per file); `None` where the file cannot be mapped or is too short (the general path then says
/// what is wrong).
fn bytes_of(
    t: &mut TensorProto,
    base: Option<&Path>,
    maps: &mut HashMap<PathBuf, Option<Arc<memmap2::Mmap>>>,
) -> Option<Bytes> {
    if t.data_location != Some(1) {
        if !t.raw_data.is_empty() {
            return Some(Bytes::Owned(std::mem::take(&mut t.raw_data)));
        }
        let raw: Vec<u8> = match t.data_type {
            FLOAT => std::mem::take(&mut t.float_data)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            _ => (std::mem::take(&mut t.int32_data).iter())
                .flat_map(|&v| (v as u16).to_le_bytes())
                .collect(),
        };
        return Some(Bytes::Owned(raw));
    }
    let (path, at, declared) = external_location(t, base)?;
    let len = t.dims.iter().product::<i64>() as usize * if t.data_type == FLOAT { 4 } else { 2 };
    if declared.is_some_and(|d| d != len as u64) {
        return None;
    }
    let map = maps
        .entry(path.clone())
        .or_insert_with(|| {
            let file = std::fs::File::open(&path).ok()?;
            // SAFETY: the file is only read; one cut short while mapped ends the process with SIGBUS, which
            // phantom's crash hint names.
            unsafe { memmap2::Mmap::map(&file) }.ok().map(Arc::new)
        })
        .clone()?;
    let at = usize::try_from(at).ok()?;
    (at.checked_add(len)? <= map.len()).then_some(Bytes::Mapped { map, at, len })
}

/// The node standing for a stored weight: no inputs, its output named as the weight, the key of its bytes.
fn node(s: &Source, key: u64) -> NodeProto {
    NodeProto {
        name: format!("\u{1}stored/{}", s.name),
        op_type: OP.into(),
        output: vec![s.name.clone()],
        attribute: vec![AttributeProto {
            name: "key".into(),
            r#type: AttributeType::Int as i32,
            i: key as i64,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weight(name: &str, data_type: i32, elems: usize) -> TensorProto {
        let size = if data_type == FLOAT { 4 } else { 2 };
        TensorProto {
            name: name.into(),
            data_type,
            dims: vec![elems as i64],
            raw_data: vec![0x3c; elems * size],
            ..Default::default()
        }
    }

    #[test]
    fn large_float_weights_become_nodes_and_the_rest_stay() {
        let big = MIN_BYTES / 2;
        let mut g = GraphProto {
            initializer: vec![
                weight("w16", FLOAT16, big),
                weight("small", FLOAT, 16),
                weight("kept", FLOAT, big),
                weight("ints", 7, big),
            ],
            ..Default::default()
        };
        // IR 3: initializers are listed among the inputs too.
        g.input = (g.initializer.iter())
            .map(|t| surgery::untyped_value(&t.name))
            .collect();
        let keep = HashSet::from(["kept".to_string()]);
        let held = take(&mut g, &keep, None, None).expect("one weight is stored");
        let inputs: Vec<&str> = g.input.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(
            inputs,
            ["small", "kept", "ints"],
            "a stored weight is no input"
        );
        assert_eq!(held.bytes, MIN_BYTES as u64);
        let left: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(left, ["small", "kept", "ints"]);
        assert_eq!(g.node[0].op_type, OP);
        assert_eq!(g.node[0].output, ["w16"]);
        assert_eq!(g.value_info[0].name, "w16");
        let key = held.keys[0];
        assert!(SOURCES.lock().unwrap().contains_key(&key));
        drop(held);
        assert!(
            !SOURCES.lock().unwrap().contains_key(&key),
            "released with its parse"
        );
    }

    #[test]
    fn a_weight_in_float_data_is_stored_as_its_bytes() {
        let values: Vec<f32> = (0..MIN_BYTES / 4).map(|i| i as f32 / 3.0).collect();
        let mut g = GraphProto {
            initializer: vec![TensorProto {
                name: "w".into(),
                data_type: FLOAT,
                dims: vec![values.len() as i64],
                float_data: values.clone(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let held = take(&mut g, &HashSet::new(), None, None).expect("stored");
        let source = SOURCES.lock().unwrap()[&held.keys[0]].clone();
        let wide = source.widen().unwrap();
        let got: Vec<f64> = wide
            .to_plain_array_view::<f64>()
            .unwrap()
            .iter()
            .copied()
            .collect();
        assert_eq!(got, values.iter().map(|&v| v as f64).collect::<Vec<_>>());
    }

    #[test]
    fn a_weight_a_subgraph_reads_stays() {
        let body = GraphProto {
            node: vec![NodeProto {
                op_type: "Identity".into(),
                input: vec!["w".into()],
                output: vec!["o".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut g = GraphProto {
            initializer: vec![weight("w", FLOAT, MIN_BYTES)],
            node: vec![NodeProto {
                op_type: "If".into(),
                attribute: vec![AttributeProto {
                    name: "then_branch".into(),
                    g: Some(body),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(take(&mut g, &HashSet::new(), None, None).is_none());
        assert_eq!(g.initializer.len(), 1);
    }

    #[test]
    fn widening_is_exact_and_rounds_only_when_asked() {
        let values = [1.0f32 / 3.0, -65504.5, 1e-8, f32::INFINITY];
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let source = |round| Source {
            name: "w".into(),
            bytes: Bytes::Owned(raw.clone()),
            data_type: FLOAT,
            dims: vec![2, 2],
            round,
        };
        let elems = |t: Tensor| -> Vec<f64> {
            t.to_plain_array_view::<f64>()
                .unwrap()
                .iter()
                .copied()
                .collect()
        };
        let wide = source(None).widen().unwrap();
        assert_eq!(wide.shape(), &[2, 2]);
        assert_eq!(elems(wide), values.map(|v| v as f64));
        let rounded = source(Some(DType::F16)).widen().unwrap();
        let want = values.map(|v| half::f16::from_f32(v).to_f64());
        assert_eq!(elems(rounded), want);
        let bf = Source {
            data_type: BFLOAT16,
            bytes: Bytes::Owned(half::bf16::from_f32(-2.5).to_le_bytes().to_vec()),
            dims: vec![1],
            ..source(None)
        };
        assert_eq!(elems(bf.widen().unwrap()), [-2.5]);
    }
}
