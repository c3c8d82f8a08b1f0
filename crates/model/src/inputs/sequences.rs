//! Sequence inputs (`seq(tensor)`). Each element is a tensor input of its own, `NAME[k]`, as the graph phantom runs
//! has it ([`crate::sequences`]): given as arrays `NAME[0]`, `NAME[1]`, … of an `.npz` (or
//! `--input NAME[k]=file.npy`), as a `test_data_set`'s serialized `SequenceProto`, or generated: two elements of
//! the declared element type and shape, said in a note.

use std::collections::HashMap;

use tract_onnx::pb::type_proto;

use crate::sequences::element;
use crate::tensor::Tensor;
use crate::{Graph, ValueInfo};

/// Elements a sequence input gets when none is given.
pub const GENERATED: usize = 2;

/// The main graph's sequence inputs with their element types, by name.
pub(super) fn declared(graph: &Graph) -> HashMap<String, type_proto::Tensor> {
    let inputs: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    crate::optional::sequence_types(&graph.bytes)
        .into_iter()
        .filter(|(name, _)| inputs.contains(&name.as_str()))
        .collect()
}

/// The sequence input whose element `name` is (`NAME[k]`), if any.
pub(super) fn owner<'a>(
    name: &str,
    declared: &'a HashMap<String, type_proto::Tensor>,
) -> Option<&'a str> {
    let (base, k) = name.strip_suffix(']')?.rsplit_once('[')?;
    k.parse::<usize>().ok()?;
    declared.get_key_value(base).map(|(b, _)| b.as_str())
}

/// The inputs to prepare, in graph order: a tensor input as it is, a sequence input as its elements (as many as a
/// `SequenceProto` gave (`lengths`), else as `loaded` holds, else [`GENERATED`]); with a note for each generated
/// sequence.
pub(super) fn expanded(
    graph: &Graph,
    declared: &HashMap<String, type_proto::Tensor>,
    loaded: &HashMap<String, (Tensor, String)>,
    lengths: &HashMap<String, usize>,
) -> (Vec<ValueInfo>, Vec<String>) {
    let mut notes = vec![];
    let infos = (graph.inputs.iter())
        .flat_map(|info| {
            let Some(elem) = declared.get(&info.name) else {
                return vec![info.clone()];
            };
            let given = (0..)
                .take_while(|&k| loaded.contains_key(&element(&info.name, k)))
                .count();
            let count = match lengths.get(&info.name).copied().unwrap_or(given) {
                0 if lengths.contains_key(&info.name) => 0,
                0 => {
                    notes.push(format!(
                        "input `{}` is a sequence: {GENERATED} elements generated (give them as `{}[0]`, `{}[1]`, … \
                         in an .npz to choose)",
                        info.name, info.name, info.name
                    ));
                    GENERATED
                }
                n => n,
            };
            (0..count)
                .map(|k| crate::import::tensor_info(&element(&info.name, k), Some(elem)))
                .collect()
        })
        .collect();
    (infos, notes)
}
