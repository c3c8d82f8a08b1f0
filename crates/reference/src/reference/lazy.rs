//! The widened weights handed to tract one at a time: before tract parses the f64 model, each large float64
//! initializer's bytes move out of the model into a store, the initializer pointing at them as external data, and
//! tract's data resolver takes each from the store as it loads it. The model's weights then live once in f64 while
//! tract reads them (in tract), not twice (in the model and in tract).
//!
//! Left in the model: initializers under [`MIN_BYTES`], those the caller keeps, and any already stored externally. A parse that meets an error with the store in
//! place is redone with every weight in the model, so the store never changes an outcome.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tract_onnx::data_resolver::ModelDataResolver;
use tract_onnx::pb::{tensor_proto::DataLocation, GraphProto, StringStringEntryProto};
use tract_onnx::prelude::{TractError, TractResult};

/// Initializers smaller than this stay in the model (shape constants and the like: passes may read them): the
/// threshold of weights kept as stored, so both paths and the memory check take the same weights.
pub const MIN_BYTES: usize = crate::model::budget::STORED_MIN_BYTES;

const DOUBLE: i32 = 11;

/// Stored weight bytes by key, served to tract once each; external data of the model itself goes to tract's own
/// resolver.
pub struct Lazy {
    /// The directory tract resolves the stored weights' location (`.`) to.
    dir: PathBuf,
    store: Mutex<HashMap<usize, Vec<u8>>>,
}

/// Moves the large float64 initializers of `g` (the widened top graph) into a store, except those `keep` names;
/// `None` when there is none, or `dir` (the directory tract is given) cannot be resolved.
pub fn move_out(g: &mut GraphProto, keep: &HashSet<String>, dir: &str) -> Option<Arc<Lazy>> {
    let dir = Path::new(dir).canonicalize().ok()?;
    let mut store = HashMap::new();
    for (key, t) in g.initializer.iter_mut().enumerate() {
        let inline = t.data_location != Some(DataLocation::External as i32);
        if t.data_type != DOUBLE
            || t.raw_data.len() < MIN_BYTES
            || !inline
            || keep.contains(&t.name)
        {
            continue;
        }
        let data = std::mem::take(&mut t.raw_data);
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: k.into(),
            value: v,
        };
        t.external_data = vec![
            entry("location", ".".into()),
            entry("offset", key.to_string()),
            entry("length", data.len().to_string()),
        ];
        t.data_location = Some(DataLocation::External as i32);
        store.insert(key, data);
    }
    (!store.is_empty()).then(|| {
        Arc::new(Lazy {
            dir,
            store: Mutex::new(store),
        })
    })
}

impl ModelDataResolver for Lazy {
    fn read_bytes_from_path(
        &self,
        buf: &mut Vec<u8>,
        p: &Path,
        offset: usize,
        length: Option<usize>,
    ) -> TractResult<()> {
        if p != self.dir {
            return super::files::Files.read_bytes_from_path(buf, p, offset, length);
        }
        let fail = |why: String| TractError::msg(format!("stored weight {offset}: {why}"));
        let data = (self.store.lock())
            .map_err(|_| fail("the store was poisoned".into()))?
            .remove(&offset)
            .ok_or_else(|| fail("read twice".into()))?;
        if length != Some(data.len()) {
            return Err(fail(format!(
                "{length:?} bytes asked, {} stored",
                data.len()
            )));
        }
        *buf = data;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::TensorProto;

    fn weight(name: &str, bytes: usize) -> TensorProto {
        TensorProto {
            name: name.into(),
            data_type: DOUBLE,
            dims: vec![(bytes / 8) as i64],
            raw_data: vec![7; bytes],
            ..Default::default()
        }
    }

    #[test]
    fn large_weights_are_served_once_each_and_the_rest_stay() {
        let mut g = GraphProto {
            initializer: vec![
                weight("w", MIN_BYTES),
                weight("small", 64),
                weight("lstm_w", MIN_BYTES),
            ],
            ..Default::default()
        };
        let keep = HashSet::from(["lstm_w".to_string()]);
        let lazy = move_out(&mut g, &keep, ".").expect("one weight moves");
        assert!(g.initializer[0].raw_data.is_empty());
        assert_eq!(g.initializer[1].raw_data.len(), 64, "small ones stay");
        assert_eq!(g.initializer[2].raw_data.len(), MIN_BYTES, "kept ones stay");
        let mut buf = vec![];
        let dir = Path::new(".").canonicalize().unwrap();
        lazy.read_bytes_from_path(&mut buf, &dir, 0, Some(MIN_BYTES))
            .unwrap();
        assert_eq!(buf, vec![7; MIN_BYTES]);
        assert!(
            lazy.read_bytes_from_path(&mut buf, &dir, 0, Some(MIN_BYTES))
                .is_err(),
            "once"
        );
    }

    #[test]
    fn tract_loads_a_stored_weight_as_it_was() {
        let mut g = GraphProto {
            initializer: vec![weight("w", MIN_BYTES)],
            ..Default::default()
        };
        let want = g.initializer[0].clone();
        let lazy = move_out(&mut g, &HashSet::new(), ".").unwrap();
        let got = tract_onnx::tensor::load_tensor(&*lazy, &g.initializer[0], Some(".")).unwrap();
        let direct = tract_onnx::tensor::load_tensor(
            &tract_onnx::data_resolver::MmapDataResolver,
            &want,
            None,
        )
        .unwrap();
        assert_eq!(got, direct);
    }
}
