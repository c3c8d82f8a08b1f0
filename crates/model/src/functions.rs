//! Model-local functions (`FunctionProto`, as onnxscript, PyTorch's dynamo exporter and
//! `onnx.helper.make_function` write them) inlined at import, before anything else reads the graph. Every node of a
//! function body becomes a node of the graph named `<calling node>/<inner node>`, and its values
//! `<calling node>/<inner value>`, so both runtimes expose them and phantom compares, cuts and reports each one.
//!
//! Nested calls unfold (up to [`MAX_DEPTH`] levels); an attribute reference (`ref_attr_name`) takes the calling
//! node's attribute, else the function's default (`attribute_proto`), else the attribute is absent, as the spec
//! says. A function's opset imports join the model's; where a function imports another version of a domain the
//! model imports too, an op whose definition differs between the two versions is refused: inlined at the model's
//! version it would mean something else. Overloaded functions (several bodies under one name) are refused too.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto};

use super::onnx_attrs::ATTRIBUTES;

/// The deepest nesting of calls unfolded (deeper means a recursive function).
pub const MAX_DEPTH: usize = 16;

/// The fields of `FunctionProto` tract's protobuf types do not carry: attribute defaults and the overload name.
#[derive(Clone, PartialEq, prost::Message)]
struct FunctionExtra {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "10")]
    domain: Option<String>,
    #[prost(message, repeated, tag = "11")]
    attribute_proto: Vec<AttributeProto>,
    #[prost(string, optional, tag = "13")]
    overload: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ModelFunctions {
    #[prost(message, repeated, tag = "25")]
    functions: Vec<FunctionExtra>,
}

/// A function body with its attribute defaults.
struct Body<'a> {
    f: &'a FunctionProto,
    defaults: Vec<AttributeProto>,
}

/// Inlines every call of a model-local function in `model` (whose encoding is `bytes`). Returns the note the
/// report shows, or `None` when the model calls none; the reason when it cannot be done faithfully.
pub fn inline(model: &mut ModelProto, bytes: &[u8]) -> Result<Option<String>, String> {
    if model.functions.is_empty() {
        return Ok(None);
    }
    let extras = <ModelFunctions as prost::Message>::decode(bytes)
        .map_err(|e| format!("its functions cannot be read: {e}"))?
        .functions;
    let functions = std::mem::take(&mut model.functions);
    let bodies = bodies(&functions, &extras)?;
    join_opsets(model, &functions)?;
    let Some(g) = model.graph.as_mut() else {
        return Ok(None);
    };
    let mut calls = 0;
    let mut used: HashSet<String> = HashSet::new();
    for depth in 0..=MAX_DEPTH {
        let n = inline_graph(g, &bodies, &mut used);
        calls += n;
        if n == 0 {
            break;
        }
        if depth == MAX_DEPTH {
            return Err(format!(
                "its functions call each other more than {MAX_DEPTH} levels deep (a recursive function?)"
            ));
        }
    }
    if calls == 0 {
        model.functions = functions;
        return Ok(None);
    }
    let mut names: Vec<String> = used.into_iter().collect();
    names.sort();
    Ok(Some(format!(
        "{calls} call(s) of model-local functions inlined ({}): their nodes are compared as `<call>/<node>`",
        names.join(", ")
    )))
}

/// The bodies by (domain, name), with their defaults; an overloaded name is refused.
fn bodies<'a>(
    functions: &'a [FunctionProto],
    extras: &[FunctionExtra],
) -> Result<HashMap<(String, String), Body<'a>>, String> {
    let mut out = HashMap::new();
    for (k, f) in functions.iter().enumerate() {
        let key = (
            f.domain.clone().unwrap_or_default(),
            f.name.clone().unwrap_or_default(),
        );
        let extra = extras.get(k);
        if extra.is_some_and(|e| e.overload.as_deref().is_some_and(|o| !o.is_empty()))
            || out.contains_key(&key)
        {
            return Err(format!(
                "function `{}` of domain `{}` is overloaded; phantom inlines functions with one body per name",
                key.1, key.0
            ));
        }
        let defaults = extra.map(|e| e.attribute_proto.clone()).unwrap_or_default();
        out.insert(key, Body { f, defaults });
    }
    Ok(out)
}

/// The version of `op` defined at opset `v` of `domain` (`None` for ops of other domains).
fn defined_since(domain: &str, op: &str, v: i64) -> Option<i64> {
    let d = if domain == "ai.onnx" { "" } else { domain };
    ATTRIBUTES
        .iter()
        .filter(|(dd, o, since, _)| *dd == d && *o == op && *since <= v)
        .map(|(_, _, since, _)| *since)
        .max()
}

/// Adds the functions' opset imports to the model's; a domain both import at different versions is accepted
/// only where every op the function uses from it has one definition at both.
fn join_opsets(model: &mut ModelProto, functions: &[FunctionProto]) -> Result<(), String> {
    for f in functions {
        for o in &f.opset_import {
            let same = |d: &str| d == o.domain || (d.is_empty() && o.domain == "ai.onnx");
            match model.opset_import.iter().find(|m| same(&m.domain)) {
                None => model.opset_import.push(o.clone()),
                Some(m) if m.version == o.version => {}
                Some(m) => {
                    let mv = m.version;
                    for n in f.node.iter().filter(|n| same(&n.domain)) {
                        let (at_f, at_m) = (
                            defined_since(&o.domain, &n.op_type, o.version),
                            defined_since(&o.domain, &n.op_type, mv),
                        );
                        if at_f != at_m {
                            return Err(format!(
                                "function `{}` uses {} at opset {} of `{}`, the model imports opset {mv}, where {} \
                                 is defined differently: inlined, it would compute something else",
                                f.name.as_deref().unwrap_or_default(),
                                n.op_type,
                                o.version,
                                o.domain,
                                n.op_type
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// One pass over `g` (and its subgraphs): each call replaced by its body. Returns how many calls were inlined.
fn inline_graph(
    g: &mut GraphProto,
    bodies: &HashMap<(String, String), Body>,
    used: &mut HashSet<String>,
) -> usize {
    let mut count = 0;
    let mut out = Vec::with_capacity(g.node.len());
    for (k, mut node) in std::mem::take(&mut g.node).into_iter().enumerate() {
        for a in node.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                count += inline_graph(sub, bodies, used);
            }
        }
        match bodies.get(&(node.domain.clone(), node.op_type.clone())) {
            Some(body) => {
                used.insert(node.op_type.clone());
                out.extend(expand(&node, body, k));
                count += 1;
            }
            None => out.push(node),
        }
    }
    g.node = out;
    count
}

/// The nodes of `body` as called by `call` (the `k`th node of its graph).
fn expand(call: &NodeProto, body: &Body, k: usize) -> Vec<NodeProto> {
    let f = body.f;
    let prefix = match call.name.is_empty() {
        true => format!("{}_{k}", call.op_type),
        false => call.name.clone(),
    };
    let mut names: HashMap<String, String> = HashMap::new();
    for (i, formal) in f.input.iter().enumerate() {
        names.insert(
            formal.clone(),
            call.input.get(i).cloned().unwrap_or_default(),
        );
    }
    for (i, formal) in f.output.iter().enumerate() {
        let actual = call.output.get(i).filter(|o| !o.is_empty()).cloned();
        names.insert(
            formal.clone(),
            actual.unwrap_or_else(|| format!("{prefix}/{formal}")),
        );
    }
    for n in &f.node {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            names
                .entry(o.clone())
                .or_insert_with(|| format!("{prefix}/{o}"));
        }
    }
    let attrs = |name: &str| {
        (call.attribute.iter())
            .chain(&body.defaults)
            .find(|a| a.name == name)
            .cloned()
    };
    f.node
        .iter()
        .enumerate()
        .map(|(j, n)| {
            let mut n = n.clone();
            let inner = match n.name.is_empty() {
                true => format!("{}_{j}", n.op_type),
                false => n.name.clone(),
            };
            n.name = format!("{prefix}/{inner}");
            rename_node(&mut n, &names, &attrs);
            n
        })
        .collect()
}

/// Renames `n`'s values (and those its subgraphs read from the function) and resolves its attribute references.
fn rename_node(
    n: &mut NodeProto,
    names: &HashMap<String, String>,
    attrs: &dyn Fn(&str) -> Option<AttributeProto>,
) {
    let rename = |v: &mut String| {
        if let Some(new) = names.get(v.as_str()) {
            *v = new.clone();
        }
    };
    n.input.iter_mut().for_each(rename);
    n.output.iter_mut().for_each(rename);
    n.attribute = std::mem::take(&mut n.attribute)
        .into_iter()
        .filter_map(|a| match a.ref_attr_name.is_empty() {
            true => Some(a),
            false => attrs(&a.ref_attr_name).map(|mut v| {
                v.name = a.name.clone();
                v
            }),
        })
        .collect();
    for a in n.attribute.iter_mut() {
        for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
            rename_subgraph(sub, names, attrs);
        }
    }
}

/// In a subgraph of a function's node: the values it reads from the function, renamed; its own stay.
fn rename_subgraph(
    g: &mut GraphProto,
    names: &HashMap<String, String>,
    attrs: &dyn Fn(&str) -> Option<AttributeProto>,
) {
    let own: HashSet<String> = (g.input.iter().map(|i| i.name.clone()))
        .chain(g.initializer.iter().map(|t| t.name.clone()))
        .chain(g.node.iter().flat_map(|n| n.output.clone()))
        .collect();
    let outer: HashMap<String, String> = names
        .iter()
        .filter(|(k, _)| !own.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for n in g.node.iter_mut() {
        rename_node(n, &outer, attrs);
    }
    for o in g.output.iter_mut() {
        if let Some(new) = outer.get(&o.name) {
            o.name = new.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use tract_onnx::pb::OperatorSetIdProto;

    fn node(op: &str, domain: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            domain: domain.into(),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: outs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn function(name: &str, nodes: Vec<NodeProto>) -> FunctionProto {
        FunctionProto {
            name: Some(name.into()),
            domain: Some("local".into()),
            input: vec!["a".into()],
            output: vec!["b".into()],
            node: nodes,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            ..Default::default()
        }
    }

    fn model(nodes: Vec<NodeProto>, functions: Vec<FunctionProto>) -> ModelProto {
        ModelProto {
            graph: Some(GraphProto {
                node: nodes,
                ..Default::default()
            }),
            functions,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn nested_calls_unfold_with_the_callers_names_as_prefixes() {
        let inner = function("Inner", vec![node("Relu", "", &["a"], &["b"])]);
        let outer = function(
            "Outer",
            vec![
                node("Inner", "local", &["a"], &["t"]),
                node("Neg", "", &["t"], &["b"]),
            ],
        );
        let mut call = node("Outer", "local", &["x"], &["y"]);
        call.name = "block".into();
        let mut m = model(vec![call], vec![inner, outer]);
        let bytes = m.encode_to_vec();
        let note = inline(&mut m, &bytes).unwrap().unwrap();
        assert!(note.starts_with("2 call(s)"), "{note}");
        let g = m.graph.unwrap();
        let seen: Vec<(String, Vec<String>, Vec<String>)> = g
            .node
            .iter()
            .map(|n| (n.name.clone(), n.input.clone(), n.output.clone()))
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    "block/Inner_0/Relu_0".into(),
                    vec!["x".into()],
                    vec!["block/t".into()]
                ),
                (
                    "block/Neg_1".into(),
                    vec!["block/t".into()],
                    vec!["y".into()]
                ),
            ]
        );
        assert!(m.functions.is_empty());
    }

    #[test]
    fn a_referenced_attribute_takes_the_callers_value() {
        let mut leaky = node("LeakyRelu", "", &["a"], &["b"]);
        leaky.attribute.push(AttributeProto {
            name: "alpha".into(),
            ref_attr_name: "slope".into(),
            ..Default::default()
        });
        let mut call = node("F", "local", &["x"], &["y"]);
        call.attribute.push(AttributeProto {
            name: "slope".into(),
            f: 0.25,
            r#type: 1,
            ..Default::default()
        });
        let mut m = model(vec![call], vec![function("F", vec![leaky])]);
        let bytes = m.encode_to_vec();
        inline(&mut m, &bytes).unwrap();
        let a = &m.graph.unwrap().node[0].attribute[0];
        assert_eq!((a.name.as_str(), a.f), ("alpha", 0.25));
    }

    /// A function with attribute defaults (`attribute_proto`, which tract's `FunctionProto` lacks).
    #[derive(Clone, PartialEq, prost::Message)]
    struct FnWithDefaults {
        #[prost(string, optional, tag = "1")]
        name: Option<String>,
        #[prost(string, repeated, tag = "4")]
        input: Vec<String>,
        #[prost(string, repeated, tag = "5")]
        output: Vec<String>,
        #[prost(message, repeated, tag = "7")]
        node: Vec<NodeProto>,
        #[prost(string, optional, tag = "10")]
        domain: Option<String>,
        #[prost(message, repeated, tag = "11")]
        attribute_proto: Vec<AttributeProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct ModelWithDefaults {
        #[prost(message, optional, tag = "7")]
        graph: Option<GraphProto>,
        #[prost(message, repeated, tag = "25")]
        functions: Vec<FnWithDefaults>,
    }

    #[test]
    fn an_attribute_the_caller_omits_takes_the_functions_default() {
        let mut leaky = node("LeakyRelu", "", &["a"], &["b"]);
        leaky.attribute.push(AttributeProto {
            name: "alpha".into(),
            ref_attr_name: "slope".into(),
            ..Default::default()
        });
        let written = ModelWithDefaults {
            graph: Some(GraphProto {
                node: vec![node("F", "local", &["x"], &["y"])],
                ..Default::default()
            }),
            functions: vec![FnWithDefaults {
                name: Some("F".into()),
                domain: Some("local".into()),
                input: vec!["a".into()],
                output: vec!["b".into()],
                node: vec![leaky],
                attribute_proto: vec![AttributeProto {
                    name: "slope".into(),
                    f: 0.125,
                    r#type: 1,
                    ..Default::default()
                }],
            }],
        };
        let bytes = written.encode_to_vec();
        let mut m = ModelProto::decode(bytes.as_slice()).unwrap();
        inline(&mut m, &bytes).unwrap();
        let a = &m.graph.unwrap().node[0].attribute[0];
        assert_eq!((a.name.as_str(), a.f), ("alpha", 0.125));
    }

    #[test]
    fn a_recursive_function_is_refused() {
        let f = function("F", vec![node("F", "local", &["a"], &["b"])]);
        let mut m = model(vec![node("F", "local", &["x"], &["y"])], vec![f]);
        let bytes = m.encode_to_vec();
        assert!(inline(&mut m, &bytes).unwrap_err().contains("recursive"));
    }
}
