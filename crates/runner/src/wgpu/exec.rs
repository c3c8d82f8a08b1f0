//! The executor: walks the graph in topological order, runs each node's shader on the device (or, without one, on
//! the host), reads every value back for the comparison, and frees device buffers after their last reader (they
//! go back to the pool for the next node).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{ModelProto, NodeProto};

use super::ctx::{Ctx, DevVal, Out, Store};
use super::gpu::Gpu;
use super::host::Host;
use super::hostops;
use super::nodetime::{record_time, shapes_of};
use super::ops;
use super::readback::{Pending, READ_BATCH_BYTES};
use crate::error::{Error, Result};
use crate::facts::{HostKind, HostPlacement};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::tensor::Tensor;
use crate::RunOutput;

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

/// One run on the device: the values and where they are, the readers each value has left, and the timings.
struct Exec<'a> {
    gpu: &'a Gpu,
    host: &'a Host,
    opset: i64,
    store: Store,
    /// Value name → nodes still to read it.
    remaining: HashMap<&'a str, usize>,
    /// Values a control-flow body reads from the outer scope: they stay on the host for the whole run.
    outer_reads: HashSet<String>,
    placement: Placement,
    pending: Pending,
    run_start: std::time::Instant,
}

/// Milliseconds since `t`.
fn ms_since(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
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
    let mut run = Exec {
        gpu,
        host,
        opset: graph.default_opset().unwrap_or(13),
        store,
        remaining: consumers.iter().map(|(k, v)| (*k, v.len())).collect(),
        outer_reads: subgraph_reads(protos),
        placement: Placement::default(),
        pending: Pending::default(),
        run_start: std::time::Instant::now(),
    };
    for node in &graph.nodes {
        run.node(node, &protos[node.source_index], feed, out)?;
    }
    run.finish(out)
}

impl Exec<'_> {
    /// Reads the pending device values back (those a later host reader needs also kept in the store).
    fn flush(&mut self, out: &mut RunOutput) -> Result<()> {
        self.pending
            .flush(self.gpu, &mut self.store, out, &|n: &str| {
                needed(&self.remaining, &self.outer_reads, n)
            })
    }

    /// Runs node `p` on the device, or on the host when it has no shader path, and frees the inputs it read last.
    fn node(
        &mut self,
        node: &crate::model::Node,
        p: &NodeProto,
        feed: Option<&dyn crate::spill::Values>,
        out: &mut RunOutput,
    ) -> Result<()> {
        crate::error::at_node(&node.name);
        if let Some(feed) = feed {
            take_fed(self.gpu, p, feed, &mut self.store);
        }
        // Ops that read small float parameters (bounds, pad value, scales) from host copies.
        let reads_params = matches!(
            p.op_type.as_str(),
            "Clip" | "Pad" | "Resize" | "BatchNormalization" | "Attention"
        );
        if reads_params && p.input.iter().skip(1).any(|i| self.pending.holds(i)) {
            self.flush(out)?;
        }
        let timed = self
            .gpu
            .node_times
            .borrow()
            .is_some()
            .then(|| (std::time::Instant::now(), shapes_of(&self.store, &p.input)));
        let t = std::time::Instant::now();
        let placed = device_op(self.gpu, p, self.opset, &mut self.store)?;
        self.placement.dispatch_ms += ms_since(t);
        let device_node = matches!(placed, Out::Dev(_));
        let t = std::time::Instant::now();
        match placed {
            Out::Dev(vals) => self.keep_on_device(p, &vals, t, out)?,
            Out::Host(said) => self.run_on_host(node, p, &said, t, out)?,
        }
        if let Some((t0, inputs)) = timed {
            record_time(
                self.gpu,
                (t0, self.run_start),
                node,
                device_node,
                inputs,
                shapes_of(&self.store, &p.output),
                out,
            )?;
        }
        self.release_inputs(p);
        Ok(())
    }

    /// Keeps the device outputs `vals` of `p` for later nodes and queues them to be read back (read now once the
    /// queue holds [`READ_BATCH_BYTES`]); `t` is when the node's dispatches were recorded.
    fn keep_on_device(
        &mut self,
        p: &NodeProto,
        vals: &[DevVal],
        t: std::time::Instant,
        out: &mut RunOutput,
    ) -> Result<()> {
        for (name, v) in p.output.iter().zip(vals) {
            if name.is_empty() {
                continue;
            }
            self.pending.bytes += v.bytes(self.gpu.mode);
            self.pending.items.push((name.clone(), v.clone()));
            self.pending.names.insert(name.clone());
            self.store.dev.insert(name.clone(), v.clone());
        }
        self.pending
            .nodes
            .push(format!("{} ({})", p.name, p.op_type));
        self.placement.device_nodes += 1;
        if self.pending.bytes > READ_BATCH_BYTES {
            self.flush(out)?;
        }
        self.placement.wait_read_ms += ms_since(t);
        Ok(())
    }

    /// Runs `p` on the host (in-process shape arithmetic, else a one-node ONNX Runtime session) after reading back
    /// the device values it reads, and records why it ran there (`said`: the op's own reason, if any).
    fn run_on_host(
        &mut self,
        node: &crate::model::Node,
        p: &NodeProto,
        said: &str,
        t: std::time::Instant,
        out: &mut RunOutput,
    ) -> Result<()> {
        if p.input.iter().any(|i| self.pending.holds(i)) {
            self.flush(out)?;
        }
        self.placement.wait_read_ms += ms_since(t);
        let t = std::time::Instant::now();
        let why = host_reason(p, &self.store, said);
        let ins: Vec<Option<&Tensor>> = p.input.iter().map(|i| self.store.host.get(i)).collect();
        let native = hostops::eval(p, &ins, self.opset).map(|v| {
            p.output
                .iter()
                .cloned()
                .zip(v.into_iter().map(Ok))
                .collect::<Vec<_>>()
        });
        let ran = match native {
            Some(v) => Ok(v),
            None => self.host.run(p, &self.store.host),
        };
        self.placement.host_ms += ms_since(t);
        match ran {
            Ok(outs) => {
                for (name, v) in outs {
                    match v {
                        Ok(t) => self.keep_host_value(name, t, out),
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
        self.placement.host.insert(node.name.clone(), why);
        Ok(())
    }

    /// Records a value computed on the host: its f16 range issues, the value stored as the device stores it, kept
    /// in the store while a later node reads it.
    fn keep_host_value(&mut self, name: String, t: Tensor, out: &mut RunOutput) {
        if self.gpu.mode.is_f16() && t.dtype().is_float() {
            self.store
                .out_of_range
                .extend(crate::precision::convert::range_issues(
                    &name,
                    t.to_f64_array().iter().copied(),
                    crate::precision::LowPrecision::F16,
                ));
        }
        let t = stored_like_device(self.gpu, t);
        if needed(&self.remaining, &self.outer_reads, &name) {
            self.store.host.insert(name.clone(), t.clone());
        }
        out.values.insert(name, t);
    }

    /// Counts `p`'s reads and frees the values it read last (host copies of outer-scope reads excepted).
    fn release_inputs(&mut self, p: &NodeProto) {
        for i in p.input.iter().filter(|i| !i.is_empty()) {
            if let Some(r) = self.remaining.get_mut(i.as_str()) {
                *r = r.saturating_sub(1);
                if *r == 0 {
                    self.store.dev.remove(i);
                    self.store.aux.remove(i);
                    if !self.outer_reads.contains(i.as_str()) {
                        self.store.host.remove(i);
                    }
                }
            }
        }
    }

    /// Reads back what is still pending, notes the host values f16 overflowed, and returns where nodes ran.
    fn finish(mut self, out: &mut RunOutput) -> Result<Placement> {
        let t = std::time::Instant::now();
        self.flush(out)?;
        self.placement.wait_read_ms += ms_since(t);
        let over: Vec<&str> = self
            .store
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
        self.placement.range_issues = std::mem::take(&mut self.store.out_of_range);
        Ok(self.placement)
    }
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

/// A float value computed on the host is stored as the device stores it: in f16 in f16 mode, and a double in f32
/// (WGSL has no f64).
fn stored_like_device(gpu: &Gpu, t: Tensor) -> Tensor {
    use crate::tensor::DType;
    match (gpu.mode.is_f16(), t.dtype()) {
        (true, d) if d.is_float() => t.cast(DType::F16).unwrap_or(t),
        (false, DType::F64) => t.cast(DType::F32).unwrap_or(t),
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
    // Shaders are found by op type: another domain's op of the same name is not theirs.
    let domain = if p.domain.is_empty() {
        "ai.onnx"
    } else {
        p.domain.as_str()
    };
    if ops::domain_of(&p.op_type) != domain {
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
    let data = match p.op_type.as_str() {
        "Where" => 1,
        // The quantized operands are integers; the scales say whether the op is float arithmetic.
        "QLinearMatMul" => 1,
        _ => 0,
    };
    // A Cast of integers to a float is an upload: the host's exact values, rounded once to the storage type.
    let cast = matches!(p.op_type.as_str(), "Cast" | "CastLike");
    if !ctx.is_float(data) && !cast {
        return Ok(Out::Host(format!(
            "{} of integer values: integer arithmetic runs on the host",
            p.op_type
        )));
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
