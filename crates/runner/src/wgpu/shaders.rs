//! The WGSL sources under `shaders/`, embedded at build time, and the mode header that specialises them:
//! f32, f16 with native `enable f16;`, or f16 emulated in f32 by rounding after every operation; accumulators in
//! f32 or in the storage type (`--accumulate`). Each shader declares its bindings in the house order: the uniform
//! parameters at 0, inputs from 1, the output last.

/// How float values are stored and computed on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    F32,
    /// `enable f16;`: f16 storage and arithmetic (the adapter offers `SHADER_F16`).
    F16Native,
    /// f16 values held in f32, every result rounded to f16 (no `SHADER_F16`).
    F16Emulated,
}

impl Mode {
    pub fn is_f16(self) -> bool {
        self != Mode::F32
    }

    /// Bytes per stored element.
    pub fn elem_bytes(self) -> u64 {
        match self {
            Mode::F16Native => 2,
            _ => 4,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mode::F32 => "f32",
            Mode::F16Native => "f16 (native, enable f16)",
            Mode::F16Emulated => "f16 (emulated: f32 rounded to f16 after every operation)",
        }
    }
}

/// What sums accumulate in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accum {
    F32,
    /// The storage type: f16 sums in f16 mode.
    Storage,
}

/// One shader: its name (the file under `shaders/`), its source, and how many read-only storage inputs it binds.
pub struct Shader {
    pub name: &'static str,
    pub source: &'static str,
    pub inputs: usize,
    pub entries: &'static [&'static str],
}

pub const COMMON: &str = include_str!("../../shaders/common.wgsl");

macro_rules! shader {
    ($name:literal, $inputs:expr, [$($e:literal),*]) => {
        Shader {
            name: $name,
            source: include_str!(concat!("../../shaders/", $name, ".wgsl")),
            inputs: $inputs,
            entries: &[$($e),*],
        }
    };
}

/// Every shader phantom ships.
pub const ALL: &[Shader] = &[
    shader!("elementwise/unary", 1, ["main"]),
    shader!("elementwise/binary", 2, ["main"]),
    shader!("elementwise/where", 3, ["main"]),
    shader!("elementwise/compare", 2, ["main"]),
    shader!("elementwise/rotary", 4, ["main"]),
    shader!("layout/copy", 1, ["main"]),
    shader!("layout/pad", 1, ["main"]),
    shader!("layout/trilu", 1, ["main"]),
    shader!("layout/gather", 2, ["main", "elements"]),
    shader!("layout/resize", 1, ["main"]),
    shader!("layout/grid_sample", 2, ["main"]),
    shader!("layout/affine_grid", 1, ["main"]),
    shader!("layout/scatter", 3, ["elements", "nd"]),
    shader!("linalg/matmul", 3, ["main"]),
    shader!("linalg/qoffset", 1, ["main"]),
    shader!("linalg/qrequant", 1, ["main"]),
    shader!("conv/conv", 3, ["conv", "conv_transpose", "conv_gemm"]),
    shader!("conv/pool", 1, ["maxpool", "avgpool", "lppool"]),
    shader!("conv/pool_index", 1, ["main"]),
    shader!("reduce/reduce", 1, ["main"]),
    shader!("reduce/arg", 1, ["main"]),
    shader!("reduce/topk", 1, ["main"]),
    shader!("reduce/lane", 1, ["cumulative", "hardmax", "lpnorm", "lrn"]),
    shader!("reduce/loss", 3, ["nll", "nll_reduce"]),
    shader!("reduce/softmax", 1, ["main"]),
    shader!(
        "reduce/norm",
        3,
        [
            "layernorm",
            "layernorm_stats",
            "instancenorm",
            "affine",
            "groupnorm"
        ]
    ),
];

pub fn find(name: &str) -> Option<&'static Shader> {
    ALL.iter().find(|s| s.name == name)
}

/// The mode header: the types `T`, `A` and the rounding functions `R`, `RA` the shaders are written against.
pub fn header(mode: Mode, acc: Accum) -> String {
    let mut h = String::new();
    match mode {
        Mode::F32 => h.push_str("alias T = f32;\nfn R(x: T) -> T { return x; }\n"),
        Mode::F16Native => {
            h.push_str("enable f16;\nalias T = f16;\nfn R(x: T) -> T { return x; }\n")
        }
        Mode::F16Emulated => h.push_str("alias T = f32;\nfn R(x: T) -> T { return r16(x); }\n"),
    }
    match (acc, mode) {
        (Accum::F32, _) | (_, Mode::F32) => {
            h.push_str("alias A = f32;\nfn RA(x: A) -> A { return x; }\n")
        }
        (Accum::Storage, _) => h.push_str("alias A = T;\nfn RA(x: A) -> A { return R(x); }\n"),
    }
    h
}

/// The full source of `shader` in `mode`.
pub fn source(shader: &Shader, mode: Mode, acc: Accum) -> String {
    format!("{}{}\n{}", header(mode, acc), COMMON, shader.source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::naga;

    /// Every shader, in every mode, parses and validates with naga: no GPU needed.
    #[test]
    fn every_shader_validates_with_naga() {
        let modes = [
            (Mode::F32, Accum::F32),
            (Mode::F16Native, Accum::F32),
            (Mode::F16Native, Accum::Storage),
            (Mode::F16Emulated, Accum::F32),
            (Mode::F16Emulated, Accum::Storage),
        ];
        let mut checked = 0;
        for s in ALL {
            for (m, a) in modes {
                let src = source(s, m, a);
                let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
                    panic!("{} ({m:?}, {a:?}): {}", s.name, e.emit_to_string(&src))
                });
                let caps = naga::valid::Capabilities::SHADER_FLOAT16;
                naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                    .validate(&module)
                    .unwrap_or_else(|e| {
                        panic!("{} ({m:?}, {a:?}): {}", s.name, e.emit_to_string(&src))
                    });
                for e in s.entries {
                    assert!(
                        module.entry_points.iter().any(|ep| ep.name == *e),
                        "{} has no entry point {e}",
                        s.name
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, ALL.len() * modes.len());
        // Every file under shaders/ is embedded (a new shader cannot be forgotten).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
        let mut files = vec![];
        for fam in std::fs::read_dir(&dir).unwrap() {
            let fam = fam.unwrap().path();
            if fam.is_dir() {
                for f in std::fs::read_dir(&fam).unwrap() {
                    let f = f.unwrap().path();
                    let rel = f.strip_prefix(&dir).unwrap().with_extension("");
                    files.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        files.sort();
        let mut names: Vec<String> = ALL.iter().map(|s| s.name.to_string()).collect();
        names.sort();
        assert_eq!(files, names);
    }

    #[test]
    fn header_defines_types() {
        assert!(header(Mode::F16Native, Accum::F32).starts_with("enable f16;"));
        assert!(header(Mode::F16Emulated, Accum::Storage).contains("r16"));
    }
}
