// GridSample of X [N, C, D1, ..., Dr] (r = 1 to 3) at a grid [N, O1, ..., Or, r] of normalized coordinates (the
// last axis innermost spatial axis first), one invocation per output element, as the reference's grid_sample
// computes it: the coordinate denormalized (align_corners or not), rounded half to even for nearest, brought
// inside by the padding (border clamps, reflection reflects), then 1, 2 or 4 taps per axis (Keys' cubic,
// a = -0.75); a tap outside the input reads 0 (zeros), the edge (border) or its reflection truncated (reflection).
// params: 0 n, 1 r, 2 C, 3 mode (0 nearest, 1 linear, 2 cubic), 4 padding (0 zeros, 1 border, 2 reflection),
//         5 align_corners, 6 grid points per batch (O1···Or), 8..11 D1..Dr

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> grid: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;

fn bounds(d: f32) -> vec2<f32> {
    if (pu(5u) != 0u) { return vec2<f32>(0.0, d - 1.0); }
    return vec2<f32>(-0.5, d - 0.5);
}

fn reflect(v: f32, lo: f32, hi: f32) -> f32 {
    let span = hi - lo;
    if (span <= 0.0) { return lo; }
    var dx = 0.0;
    var from_lo = true;
    if (v < lo) { dx = lo - v; } else if (v > hi) { dx = v - hi; from_lo = false; } else { return v; }
    let flips = trunc(dx / span);
    let r = dx - flips * span;
    if ((flips % 2.0 == 0.0) == from_lo) { return lo + r; }
    return hi - r;
}

fn coordinate(g: f32, d: f32) -> f32 {
    var v = ((g + 1.0) * d - 1.0) / 2.0;
    if (pu(5u) != 0u) { v = (g + 1.0) / 2.0 * (d - 1.0); }
    if (pu(3u) == 0u) { v = round(v); }
    let b = bounds(d);
    if (v < b.x || v > b.y) {
        if (pu(4u) == 1u) { v = clamp(v, 0.0, d - 1.0); }
        if (pu(4u) == 2u) { v = reflect(v, b.x, b.y); }
    }
    return v;
}

// The index read for whole pixel coordinate i on an axis of length d, or -1 where it reads zeros.
fn pixel(i: f32, d: f32) -> i32 {
    let last = d - 1.0;
    if (pu(4u) == 0u) {
        if (i < 0.0 || i > last) { return -1; }
        return i32(i);
    }
    if (pu(4u) == 1u) { return i32(clamp(i, 0.0, last)); }
    let b = bounds(d);
    return i32(clamp(trunc(reflect(i, b.x, b.y)), 0.0, last));
}

fn far(d: f32) -> f32 { let a = -0.75; return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a; }
fn near(d: f32) -> f32 { let a = -0.75; return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0; }

struct Taps { i: vec4<i32>, w: vec4<f32> }

fn taps(v: f32, d: f32) -> Taps {
    var t: Taps;
    let x0 = floor(v);
    let f = v - x0;
    switch pu(3u) {
        case 0u: { t.i = vec4<i32>(pixel(trunc(v), d), -1, -1, -1); t.w = vec4<f32>(1.0, 0.0, 0.0, 0.0); }
        case 1u: {
            t.i = vec4<i32>(pixel(x0, d), pixel(x0 + 1.0, d), -1, -1);
            t.w = vec4<f32>(1.0 - f, f, 0.0, 0.0);
        }
        default: {
            t.i = vec4<i32>(pixel(x0 - 1.0, d), pixel(x0, d), pixel(x0 + 1.0, d), pixel(x0 + 2.0, d));
            t.w = vec4<f32>(far(f + 1.0), near(f), near(1.0 - f), far(2.0 - f));
        }
    }
    return t;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let r = pu(1u);
    let pts = pu(6u);
    let p = o % pts;
    let nc = o / pts;
    let n = nc / pu(2u);
    var plane = 1u;
    for (var a = 0u; a < r; a = a + 1u) { plane = plane * pu(8u + a); }
    var ts: array<Taps, 3>;
    for (var a = 0u; a < r; a = a + 1u) {
        let d = f32(pu(8u + a));
        let g = f32(grid[(n * pts + p) * r + (r - 1u - a)]);
        ts[a] = taps(coordinate(g, d), d);
    }
    let k = select(select(4u, 2u, pu(3u) == 1u), 1u, pu(3u) == 0u);
    var combos = 1u;
    for (var a = 0u; a < r; a = a + 1u) { combos = combos * k; }
    var acc = 0.0;
    for (var c = 0u; c < combos; c = c + 1u) {
        var rest = c;
        var off = 0u;
        var w = 1.0;
        var inside = true;
        for (var a = 0u; a < r; a = a + 1u) {
            let j = rest % k;
            rest = rest / k;
            let idx = ts[a].i[j];
            if (idx < 0) { inside = false; }
            off = off * pu(8u + a) + u32(max(idx, 0));
            w = w * ts[a].w[j];
        }
        if (inside) { acc = acc + w * f32(x[nc * plane + off]); }
    }
    y[o] = TF(acc);
}
