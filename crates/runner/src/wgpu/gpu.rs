//! The device side of the wgpu executor: one device and queue, pipelines cached by (shader, entry point), a pool
//! of storage buffers reused by size, uniform parameter blocks, dispatches and read-backs. Validation errors
//! are caught (wgpu would panic otherwise) and turned into errors naming the node.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::device::AdapterSummary;
use super::shaders::{self, Accum, Mode, Shader};
use crate::error::{Error, Result};

/// Parameter words per dispatch (the `Params` block of `shaders/common.wgsl`).
pub const PARAM_WORDS: usize = 64;
const WG: u32 = 256;

type Pool = Rc<RefCell<HashMap<u64, Vec<wgpu::Buffer>>>>;

/// A storage buffer that goes back to the pool when dropped.
pub struct Buf {
    pub raw: wgpu::Buffer,
    /// Bytes in use (the buffer may be larger).
    pub bytes: u64,
    pool: Pool,
}

impl Drop for Buf {
    fn drop(&mut self) {
        let size = self.raw.size();
        self.pool
            .borrow_mut()
            .entry(size)
            .or_default()
            .push(self.raw.clone());
    }
}

/// A storage binding: a whole buffer, or a byte range of it (chunks of tensors beyond the binding limit).
#[derive(Clone, Copy)]
pub struct Bind<'a> {
    pub buf: &'a Buf,
    pub offset: u64,
    pub size: Option<u64>,
}

impl<'a> From<&'a Buf> for Bind<'a> {
    fn from(buf: &'a Buf) -> Bind<'a> {
        Bind {
            buf,
            offset: 0,
            size: None,
        }
    }
}

impl Bind<'_> {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buf.raw,
            offset: self.offset,
            size: self.size.and_then(wgpu::BufferSize::new),
        })
    }

    /// Bytes this binding spans.
    pub fn span(&self) -> u64 {
        self.size.unwrap_or(self.buf.raw.size() - self.offset)
    }
}

struct Pipe {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    pub mode: Mode,
    pub acc: Accum,
    pipes: RefCell<HashMap<(&'static str, &'static str), Rc<Pipe>>>,
    pool: Pool,
    dummy: wgpu::Buffer,
    errors: Arc<Mutex<Vec<String>>>,
    max_binding: u64,
    /// Dispatches and pipelines created, for the report.
    pub dispatches: RefCell<usize>,
    /// Nodes computed in slabs because a value exceeded the binding limit, for the report.
    pub cut_nodes: RefCell<usize>,
    /// When set (`phantom profile`), each node waits for the device and its wall time is recorded here.
    pub node_times: RefCell<Option<Vec<NodeTime>>>,
}

/// One node's wall time in a timed run: record, submit and wait for the device (or run on the host).
#[derive(Clone, Debug)]
pub struct NodeTime {
    pub node: String,
    pub op_type: String,
    pub on_device: bool,
    /// Microseconds since the run started, and the node's duration.
    pub start_us: u64,
    pub dur_us: u64,
    pub inputs: Vec<Vec<usize>>,
    pub outputs: Vec<Vec<usize>>,
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

impl Gpu {
    /// Opens the device on `adapter` for `mode` (requests `SHADER_F16` for native f16) with the adapter's limits.
    pub fn open(adapter: &wgpu::Adapter, mode: Mode, acc: Accum) -> Result<Gpu> {
        let summary = super::device::summarize(adapter);
        let binding_limit = summary.max_storage_buffer_binding_size;
        let mut features = wgpu::Features::empty();
        if mode == Mode::F16Native {
            features |= wgpu::Features::SHADER_F16;
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("phantom"),
            required_features: features,
            required_limits: adapter.limits(),
            experimental_features: Default::default(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: Default::default(),
        }))
        .map_err(|e| Error::Wgpu {
            reason: format!("wgpu: cannot open a device on {}: {e}", summary.name),
        })?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().expect("error sink").push(e.to_string());
        }));
        let dummy = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("phantom unused binding"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        Ok(Gpu {
            device,
            queue,
            adapter: summary,
            mode,
            acc,
            pipes: RefCell::default(),
            pool: Rc::default(),
            dummy,
            errors,
            // PHANTOM_WGPU_MAX_BINDING lowers the binding limit (tests exercise chunking with small tensors).
            max_binding: std::env::var("PHANTOM_WGPU_MAX_BINDING")
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .map(|v| v.max(4096))
                .unwrap_or(u64::MAX)
                .min(binding_limit),
            dispatches: RefCell::new(0),
            cut_nodes: RefCell::new(0),
            node_times: RefCell::new(None),
        })
    }

    /// The device errors raised since the last call, as one error naming `what`.
    pub fn check(&self, what: &str) -> Result<()> {
        let errs: Vec<String> = std::mem::take(&mut *self.errors.lock().expect("error sink"));
        match errs.is_empty() {
            true => Ok(()),
            false => Err(Error::Wgpu {
                reason: format!("wgpu, {what}: {}", errs.join("; ")),
            }),
        }
    }

    /// The most bytes one storage binding may span.
    pub fn max_binding(&self) -> u64 {
        self.max_binding
    }

    /// A storage buffer of at least `bytes` (rounded up to a power of two so buffers are reused across sizes).
    pub fn alloc(&self, bytes: u64) -> Buf {
        let size = bytes.max(16).next_power_of_two();
        let reused = self.pool.borrow_mut().get_mut(&size).and_then(|v| v.pop());
        let raw = reused.unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("phantom value"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        Buf {
            raw,
            bytes,
            pool: self.pool.clone(),
        }
    }

    /// A buffer holding `data` (padded to 4 bytes). Always a fresh buffer, filled at creation: a pooled one
    /// written with `queue.write_buffer` would be written before the commands of the encoder being recorded,
    /// which may still read its previous contents (a node cut into slabs uploads per slab).
    pub fn upload(&self, data: &[u8]) -> Buf {
        let bytes = data.len() as u64;
        let size = bytes.div_ceil(4).max(4).next_power_of_two() * 4;
        let raw = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("phantom upload"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: true,
        });
        if !data.is_empty() {
            let padded: std::borrow::Cow<[u8]> = match data.len() % 4 {
                0 => data.into(),
                r => [data, &[0u8; 4][r..]].concat().into(),
            };
            if let Ok(mut view) = raw.slice(..padded.len() as u64).get_mapped_range_mut() {
                view.copy_from_slice(&padded);
            }
        }
        raw.unmap();
        Buf {
            raw,
            bytes: bytes.div_ceil(4) * 4,
            pool: self.pool.clone(),
        }
    }

    fn pipe(&self, shader: &'static Shader, entry: &'static str) -> Rc<Pipe> {
        if let Some(p) = self.pipes.borrow().get(&(shader.name, entry)) {
            return p.clone();
        }
        let src = shaders::source(shader, self.mode, self.acc);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(shader.name),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }];
        for i in 0..shader.inputs {
            entries.push(storage_entry(1 + i as u32, true));
        }
        entries.push(storage_entry(1 + shader.inputs as u32, false));
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(shader.name),
                entries: &entries,
            });
        let pl = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(shader.name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(shader.name),
                layout: Some(&pl),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
        let p = Rc::new(Pipe { pipeline, layout });
        self.pipes
            .borrow_mut()
            .insert((shader.name, entry), p.clone());
        p
    }

    /// Records one dispatch of `shader`'s `entry` into `enc`: `params` in the uniform block, `inputs` bound from 1
    /// (`None` binds a placeholder), `out` last; `groups` workgroups, folded into x and y past 65,535.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        enc: &mut wgpu::CommandEncoder,
        shader: &str,
        entry: &'static str,
        params: &[u32],
        inputs: &[Option<&Buf>],
        out: &Buf,
        groups: [u32; 3],
        label: &str,
    ) -> Result<()> {
        let ins: Vec<Option<Bind>> = inputs.iter().map(|b| b.map(Bind::from)).collect();
        self.dispatch_bound(enc, shader, entry, params, &ins, out.into(), groups, label)
    }

    /// [`Gpu::dispatch`] with byte ranges of buffers bound.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_bound(
        &self,
        enc: &mut wgpu::CommandEncoder,
        shader: &str,
        entry: &'static str,
        params: &[u32],
        inputs: &[Option<Bind>],
        out: Bind,
        groups: [u32; 3],
        label: &str,
    ) -> Result<()> {
        let sh = shaders::find(shader).ok_or_else(|| Error::Wgpu {
            reason: format!("wgpu: no shader {shader}"),
        })?;
        assert!(
            params.len() <= PARAM_WORDS,
            "too many parameters for {shader}"
        );
        assert_eq!(inputs.len(), sh.inputs, "bindings of {shader}");
        let entry = sh
            .entries
            .iter()
            .find(|e| **e == entry)
            .copied()
            .unwrap_or(entry);
        let pipe = self.pipe(sh, entry);
        let mut words = [0u32; PARAM_WORDS];
        words[..params.len()].copy_from_slice(params);
        let uni = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (PARAM_WORDS * 4) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.queue.write_buffer(&uni, 0, &bytes);
        let mut bind = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uni.as_entire_binding(),
        }];
        for (i, b) in inputs.iter().enumerate() {
            bind.push(wgpu::BindGroupEntry {
                binding: 1 + i as u32,
                resource: match b {
                    Some(b) => b.resource(),
                    None => self.dummy.as_entire_binding(),
                },
            });
        }
        bind.push(wgpu::BindGroupEntry {
            binding: 1 + inputs.len() as u32,
            resource: out.resource(),
        });
        let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &pipe.layout,
            entries: &bind,
        });
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipe.pipeline);
        pass.set_bind_group(0, &bg, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        *self.dispatches.borrow_mut() += 1;
        Ok(())
    }

    /// Workgroups for `n` invocations of a 256-wide 1-D shader (see `flat` in `common.wgsl`).
    pub fn groups_1d(n: usize) -> [u32; 3] {
        let g = (n as u64).div_ceil(WG as u64).max(1);
        if g <= 65535 {
            [g as u32, 1, 1]
        } else {
            [65535, g.div_ceil(65535) as u32, 1]
        }
    }

    /// Workgroups for `rows` one-workgroup-per-row dispatches (see `row_of` in `common.wgsl`).
    pub fn groups_rows(rows: usize) -> [u32; 3] {
        let g = (rows as u64).max(1);
        if g <= 65535 {
            [g as u32, 1, 1]
        } else {
            [65535, g.div_ceil(65535) as u32, 1]
        }
    }

    pub fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Submits `enc` and waits for the device.
    pub fn submit(&self, enc: wgpu::CommandEncoder) {
        self.queue.submit([enc.finish()]);
    }

    /// Waits until the device has finished everything submitted.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Wgpu {
                reason: format!("wgpu: waiting for the device: {e}"),
            })
    }

    /// Copies the first `bytes` of each buffer back to the host (one submission, one wait).
    pub fn read(&self, bufs: &[(&Buf, u64)]) -> Result<Vec<Vec<u8>>> {
        let mut enc = self.encoder("phantom read-back");
        let mut staging = vec![];
        for (b, bytes) in bufs {
            let size = bytes.div_ceil(4) * 4;
            let s = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("phantom read-back"),
                size: size.max(4),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            if size > 0 {
                enc.copy_buffer_to_buffer(&b.raw, 0, &s, 0, size);
            }
            staging.push((s, *bytes));
        }
        self.queue.submit([enc.finish()]);
        for (s, _) in &staging {
            s.map_async(wgpu::MapMode::Read, .., |_| {});
        }
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Wgpu {
                reason: format!("wgpu: waiting for the device: {e}"),
            })?;
        let mut out = vec![];
        for (s, bytes) in staging {
            let view = s.get_mapped_range(..).map_err(|e| Error::Wgpu {
                reason: format!("wgpu: reading a value back: {e}"),
            })?;
            out.push(view[..bytes as usize].to_vec());
            drop(view);
            s.unmap();
        }
        Ok(out)
    }
}
