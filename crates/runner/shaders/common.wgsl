// phantom's shared prelude, prepended to every shader after a mode header that defines:
//   T        the storage/compute type (f32, or f16 under `enable f16;`)
//   R(x: T)  rounding after every operation: identity for native types, to f16 when f16 is emulated in f32
//   A, RA    the accumulator type and its rounding (`--accumulate f16|f32`)
// Parameters (shapes, strides, attributes) come in one uniform block of 64 u32 words; floats as their bits.

struct Params { v: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;

const WG: u32 = 256u;

fn pu(i: u32) -> u32 { return P.v[i >> 2u][i & 3u]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(pu(i)); }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }

// Flat invocation index of a 1-D dispatch folded into x and y (each at most 65535 workgroups).
fn flat(id: vec3<u32>, nwg: vec3<u32>) -> u32 { return id.x + id.y * nwg.x * WG; }

// Row index of a one-workgroup-per-row dispatch (rows folded into x and y). Long loops are split over the 256
// invocations of a workgroup and combined in a tree: besides speed, this keeps every loop far below the trip count
// at which software rasterizers (lavapipe) stop a loop (about 65,535 iterations of a loop nest).
fn row_of(wg: vec3<u32>, nwg: vec3<u32>) -> u32 { return wg.x + wg.y * nwg.x; }

// Rounds an f32 to the nearest f16 value (ties to even), kept in f32: overflow to infinity from 65520 on,
// subnormals on the 2^-24 grid. Bit-identical to true f16 arithmetic for +, -, x, / and sqrt of f16 operands.
fn r16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let s = b & 0x80000000u;
    let a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) { return x; }
    if (a >= 0x477ff000u) { return bitcast<f32>(s | 0x7f800000u); }
    if (a < 0x38800000u) {
        let q = round(bitcast<f32>(a) * 16777216.0) / 16777216.0;
        return bitcast<f32>(s | bitcast<u32>(q));
    }
    let lsb = (a >> 13u) & 1u;
    return bitcast<f32>(s | ((a + 0xfffu + lsb) & 0xffffe000u));
}

// Rounds an f32 to the nearest bfloat16 value (ties to even), kept in f32.
fn rbf16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) >= 0x7f800000u) { return x; }
    let lsb = (b >> 16u) & 1u;
    return bitcast<f32>((b + 0x7fffu + lsb) & 0xffff0000u);
}

// NaN recognised by its bits (a compiler may fold `v != v` away under fast-math assumptions).
fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

// An f32 result stored as T, rounded once (transcendental functions are computed in f32 and rounded).
fn TF(x: f32) -> T { return R(T(x)); }

// Element offset of flat index `i` in a view of `rank` dims: shape at params[shp..], strides (i32) at params[st..].
fn strided(i: u32, rank: u32, shp: u32, st: u32) -> i32 {
    var r = i;
    var o = 0i;
    for (var d = i32(rank) - 1; d >= 0; d = d - 1) {
        let n = pu(shp + u32(d));
        o = o + i32(r % n) * pi(st + u32(d));
        r = r / n;
    }
    return o;
}
