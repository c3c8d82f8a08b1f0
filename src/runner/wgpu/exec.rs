//! The executor: walks the graph in topological order, runs each node's shader on the device (or, without one, on
//! the host), reads every value back for the comparison, and frees device buffers after their last reader (they
//! go back to the pool for the next node).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{ModelProto, NodeProto};

use super::ctx::{download, Ctx, DevVal, Out, Store};
use super::gpu::Gpu;
use super::host::Host;
use super::hostops;
use super::ops;
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::runner::facts::{HostKind, HostPlacement};
use crate::runner::RunOutput;
use crate::tensor::Tensor;

/// Device values not read back yet: read in one submission and one wait when a host node needs one of them, when
/// they add up to [`READ_BATCH_BYTES`], and at the end (a wait per node costs milliseconds on some drivers).
#[derive(Default)]
struct Pending {
    items: Vec<(String, DevVal)>,
    names: std::collections::HashSet<String>,
    bytes: u64,
    nodes: Vec<String>,
}

const READ_BATCH_BYTES: u64 = 256 << 20;

impl Pending {
    fn holds(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Reads the pending values back into `out`; those a later node still reads on the host (`needed`) are also kept
    /// in the store.
    fn flush(
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
            .map(|(_, v)| (&*v.buf, v.len() as u64 * gpu.mode.elem_bytes()))
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

/// Where each node ran, for the report.
#[derive(Default)]
pub struct Placement {
    /// Node name → why it ran on the host (absent: on the device).
    pub host: HashMap<String, HostPlacement>,
    pub device_nodes: usize,
    /// Milliseconds spent recording and submitting dispatches, waiting for them and reading values back, and
    /// running nodes on the host.
    pub dispatch_ms: f64,
    pub wait_read_ms: f64,
    pub host_ms: f64,
    /// Values f16 cannot hold, found as they were uploaded.
    pub range_issues: Vec<crate::precision::convert::RangeIssue>,
}

fn initializers(proto: &ModelProto, dir: &std::path::Path, store: &mut Store) -> Result<()> {
    let g = proto.graph.as_ref().expect("decoded models have a graph");
    for t in &g.initializer {
        let v = crate::model::proto::tensor_from_proto(t, Some(dir))?;
        store.host.insert(t.name.clone(), v);
    }
    Ok(())
}

/// Runs `graph` (decoded as `proto`) on the device, every value read back into `out.values`. With `feed`, every
/// node reads the values given there instead of those computed before it (stored as the device stores them): each
/// node's own, introduced error.
pub fn execute(
    gpu: &Gpu,
    host: &Host,
    graph: &Graph,
    proto: &ModelProto,
    inputs: &Inputs,
    out: &mut RunOutput,
    feed: Option<&dyn crate::spill::Values>,
) -> Result<Placement> {
    let dir = graph
        .path
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let mut store = Store::default();
    initializers(proto, &dir, &mut store)?;
    for (name, t) in &inputs.tensors {
        store.host.insert(name.clone(), t.clone());
    }
    let protos = &proto.graph.as_ref().expect("graph").node;
    let consumers = graph.consumers();
    let mut remaining: HashMap<&str, usize> =
        consumers.iter().map(|(k, v)| (*k, v.len())).collect();
    // Values a control-flow body reads from the outer scope stay on the host for the whole run.
    let outer_reads = subgraph_reads(protos);
    let opset = graph.default_opset().unwrap_or(13);
    let mut placement = Placement::default();
    let mut pending = Pending::default();
    let run_start = std::time::Instant::now();
    for node in &graph.nodes {
        crate::error::at_node(&node.name);
        let p = &protos[node.source_index];
        if let Some(feed) = feed {
            take_fed(gpu, p, feed, &mut store);
        }
        // Ops that read small float parameters (bounds, pad value, scales) from host copies.
        let reads_params = matches!(
            p.op_type.as_str(),
            "Clip" | "Pad" | "Resize" | "BatchNormalization"
        );
        if reads_params && p.input.iter().skip(1).any(|i| pending.holds(i)) {
            pending.flush(gpu, &mut store, out, &|n: &str| {
                needed(&remaining, &outer_reads, n)
            })?;
        }
        let timed = gpu
            .node_times
            .borrow()
            .is_some()
            .then(|| (std::time::Instant::now(), shapes_of(&store, &p.input)));
        let t = std::time::Instant::now();
        let placed = device_op(gpu, p, opset, &mut store)?;
        placement.dispatch_ms += t.elapsed().as_secs_f64() * 1e3;
        let device_node = matches!(placed, Out::Dev(_));
        let t = std::time::Instant::now();
        let mut said = String::new();
        let on_device = match placed {
            Out::Dev(vals) => {
                for (name, v) in p.output.iter().zip(&vals) {
                    if name.is_empty() {
                        continue;
                    }
                    pending.bytes += v.len() as u64 * gpu.mode.elem_bytes();
                    pending.items.push((name.clone(), v.clone()));
                    pending.names.insert(name.clone());
                    store.dev.insert(name.clone(), v.clone());
                }
                pending.nodes.push(format!("{} ({})", p.name, p.op_type));
                placement.device_nodes += 1;
                if pending.bytes > READ_BATCH_BYTES {
                    pending.flush(gpu, &mut store, out, &|n: &str| {
                        needed(&remaining, &outer_reads, n)
                    })?;
                }
                placement.wait_read_ms += t.elapsed().as_secs_f64() * 1e3;
                true
            }
            Out::Host(why) => {
                said = why;
                false
            }
        };
        if !on_device {
            if p.input.iter().any(|i| pending.holds(i)) {
                pending.flush(gpu, &mut store, out, &|n: &str| {
                    needed(&remaining, &outer_reads, n)
                })?;
            }
            placement.wait_read_ms += t.elapsed().as_secs_f64() * 1e3;
            let t = std::time::Instant::now();
            let why = host_reason(p, &store, &said);
            let ins: Vec<Option<&Tensor>> = p.input.iter().map(|i| store.host.get(i)).collect();
            let native = hostops::eval(p, &ins, opset).map(|v| {
                p.output
                    .iter()
                    .cloned()
                    .zip(v.into_iter().map(Ok))
                    .collect::<Vec<_>>()
            });
            let ran = match native {
                Some(v) => Ok(v),
                None => host.run(p, &store.host),
            };
            placement.host_ms += t.elapsed().as_secs_f64() * 1e3;
            match ran {
                Ok(outs) => {
                    for (name, v) in outs {
                        match v {
                            Ok(t) => {
                                if gpu.mode.is_f16() && t.dtype().is_float() {
                                    store.out_of_range.extend(
                                        crate::precision::convert::range_issues(
                                            &name,
                                            t.to_f64_array().iter().copied(),
                                            crate::precision::LowPrecision::F16,
                                        ),
                                    );
                                }
                                let t = stored_like_device(gpu, t);
                                if needed(&remaining, &outer_reads, &name) {
                                    store.host.insert(name.clone(), t.clone());
                                }
                                out.values.insert(name, t);
                            }
                            Err(e) => {
                                out.missing.insert(name, e);
                            }
                        }
                    }
                }
                Err(e) => {
                    for o in p.output.iter().filter(|o| !o.is_empty()) {
                        out.missing.insert(
                            o.clone(),
                            format!("wgpu target: host run of {} failed: {e}", p.name),
                        );
                    }
                }
            }
            placement.host.insert(node.name.clone(), why);
        }
        if let Some((t0, inputs)) = timed {
            record_time(
                gpu,
                (t0, run_start),
                node,
                device_node,
                inputs,
                shapes_of(&store, &p.output),
                out,
            )?;
        }
        for i in p.input.iter().filter(|i| !i.is_empty()) {
            if let Some(r) = remaining.get_mut(i.as_str()) {
                *r = r.saturating_sub(1);
                if *r == 0 {
                    store.dev.remove(i);
                    store.aux.remove(i);
                    if !outer_reads.contains(i.as_str()) {
                        store.host.remove(i);
                    }
                }
            }
        }
    }
    let t = std::time::Instant::now();
    pending.flush(gpu, &mut store, out, &|n: &str| {
        needed(&remaining, &outer_reads, n)
    })?;
    placement.wait_read_ms += t.elapsed().as_secs_f64() * 1e3;
    let over: Vec<&str> = store
        .out_of_range
        .iter()
        .filter(|r| r.kind == crate::precision::convert::RangeKind::Overflow)
        .map(|r| r.tensor.as_str())
        .collect();
    if !over.is_empty() {
        out.notes.push(format!(
            "wgpu f16: {} value(s) uploaded from the host hold values beyond ±65504 and became infinite on the \
             device: {}",
            over.len(),
            over.join(", ")
        ));
    }
    placement.range_issues = std::mem::take(&mut store.out_of_range);
    Ok(placement)
}

/// Replaces `p`'s inputs with the values `feed` gives (isolated runs), stored as the device stores them.
fn take_fed(gpu: &Gpu, p: &NodeProto, feed: &dyn crate::spill::Values, store: &mut Store) {
    for i in p.input.iter().filter(|i| !i.is_empty()) {
        if let Some(r) = feed.tensor(i) {
            let own = store.host.get(i).map(Tensor::dtype);
            let want = match (gpu.mode.is_f16(), own) {
                (true, _) => crate::tensor::DType::F16,
                (false, Some(d)) => d,
                (false, None) => crate::tensor::DType::F32,
            };
            let t = match r.dtype().is_float() && r.dtype() != want {
                true => r.cast(want).unwrap_or_else(|| r.into_owned()),
                false => r.into_owned(),
            };
            store.host.insert(i.clone(), t);
            store.dev.remove(i);
            store.aux.remove(i);
        }
    }
}

/// The shapes of `names` as the store holds them (device or host; empty when absent).
fn shapes_of(store: &Store, names: &[String]) -> Vec<Vec<usize>> {
    names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| match store.dev.get(n) {
            Some(v) => v.shape.clone(),
            None => store
                .host
                .get(n)
                .map(|t| t.shape().to_vec())
                .unwrap_or_default(),
        })
        .collect()
}

/// Waits for the device (a device node) and records the node's wall time from `t0`.
fn record_time(
    gpu: &Gpu,
    (t0, run_start): (std::time::Instant, std::time::Instant),
    node: &crate::model::Node,
    on_device: bool,
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
    out: &RunOutput,
) -> Result<()> {
    if on_device {
        gpu.wait()?;
    }
    let outputs = match on_device {
        true => outputs,
        false => node
            .outputs
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| {
                out.values
                    .get(o)
                    .map(|t| t.shape().to_vec())
                    .unwrap_or_default()
            })
            .collect(),
    };
    let rec = super::gpu::NodeTime {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        on_device,
        start_us: (t0 - run_start).as_micros() as u64,
        dur_us: t0.elapsed().as_micros() as u64,
        inputs,
        outputs,
    };
    if let Some(v) = gpu.node_times.borrow_mut().as_mut() {
        v.push(rec);
    }
    Ok(())
}

/// Whether a value is still read later on the host (a later node, or a control-flow body).
fn needed(remaining: &HashMap<&str, usize>, outer: &HashSet<String>, name: &str) -> bool {
    remaining.get(name).is_some_and(|&r| r > 0) || outer.contains(name)
}

/// Every value named inside a control-flow body (If/Loop/Scan graphs, recursively).
fn subgraph_reads(nodes: &[NodeProto]) -> HashSet<String> {
    let mut out = HashSet::new();
    for n in nodes {
        for a in &n.attribute {
            for g in a.g.iter().chain(a.graphs.iter()) {
                for m in &g.node {
                    out.extend(m.input.iter().cloned());
                }
                out.extend(subgraph_reads(&g.node));
            }
        }
    }
    out
}

/// In f16 mode a float value computed on the host is stored in f16 like every device value.
fn stored_like_device(gpu: &Gpu, t: Tensor) -> Tensor {
    match (gpu.mode.is_f16(), t.dtype().is_float()) {
        (true, true) => t.cast(crate::tensor::DType::F16).unwrap_or(t),
        _ => t,
    }
}

fn host_reason(p: &NodeProto, store: &Store, said: &str) -> HostPlacement {
    let at = |kind, reason: String| HostPlacement { kind, reason };
    let float_in = p
        .input
        .iter()
        .filter(|i| !i.is_empty())
        .filter_map(|i| store.host.get(i))
        .any(|t| t.dtype().is_float());
    match p.op_type.as_str() {
        "Constant" => return at(HostKind::Constant, "host: constant".into()),
        "Shape" | "Size" => {
            return at(
                HostKind::ShapeArithmetic,
                "host: shape arithmetic (the shape of a value)".into(),
            )
        }
        _ => {}
    }
    if !float_in && !matches!(p.op_type.as_str(), "RandomNormal" | "RandomUniform") {
        return at(
            HostKind::ShapeArithmetic,
            "host: shape arithmetic (integer values)".into(),
        );
    }
    let why = match ops::find(&p.op_type) {
        None => format!("no shader for {}", p.op_type),
        Some(_) if !said.is_empty() => said.to_string(),
        Some(_) => format!("{} in this form has no shader path", p.op_type),
    };
    at(
        HostKind::NotCheckedOnGpu,
        format!("not checked on GPU: {why}; ran on the CPU (ONNX Runtime, f32)"),
    )
}

/// Runs `p` on the device when there is a shader for it, else says why it goes to the host.
fn device_op(gpu: &Gpu, p: &NodeProto, opset: i64, store: &mut Store) -> Result<Out> {
    let none = || Ok(Out::Host(String::new()));
    let Some(f) = ops::find(&p.op_type) else {
        return none();
    };
    if !p.domain.is_empty() && p.domain != "ai.onnx" {
        return none();
    }
    let mut ctx = Ctx {
        gpu,
        node: p,
        opset,
        enc: gpu.encoder(&p.name),
        store,
        too_big: false,
    };
    // Integer values (shape arithmetic) stay on the host.
    let data = if p.op_type == "Where" { 1 } else { 0 };
    if !ctx.is_float(data) {
        return none();
    }
    let mut r = f(&mut ctx);
    if ctx.too_big && r.is_ok() {
        // A value beyond the binding limit: cut the node into slabs (dispatches recorded so far are wasted work).
        ctx.too_big = false;
        let plans = ops::split::plans(&ctx);
        r = match super::split::run(&mut ctx, f, &plans)? {
            Ok(vals) => Ok(Out::Dev(vals)),
            Err(why) => {
                return Ok(Out::Host(format!(
                    "a value beyond the adapter's {} storage binding limit, and {why}",
                    crate::units::fmt_size(gpu.max_binding() as usize),
                )))
            }
        };
    }
    let enc = ctx.enc;
    match r {
        Ok(Out::Dev(vals)) => {
            gpu.submit(enc);
            Ok(Out::Dev(vals))
        }
        Ok(host) => Ok(host),
        Err(Error::Wgpu { reason }) => Err(Error::Wgpu {
            reason: format!("node {} ({}): {reason}", p.name, p.op_type),
        }),
        Err(e) => Err(e),
    }
}
