// Resize of the two innermost axes (NCHW images), nearest, linear or cubic, one invocation per output element. Linear
// and cubic read the neighbours of the input coordinate x as the ONNX reference does: the left one at x − 1 when x
// is whole, else floor(x), indices clamped to the edge; cubic weighs four with Keys' kernel (cubic_coeff_a), and
// exclude_outside zeroes the weights of neighbours outside the input and renormalises.
// params: 0 n, 1 in H, 2 in W, 3 out H, 4 out W, 5 mode (0 nearest, 1 linear, 2 cubic),
//         6 coordinate transform (0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel,
//         4 half_pixel_symmetric),
//         7 nearest rounding (0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil),
//         8 scale H (f32 bits), 9 scale W (f32 bits), 10 and 11 the resized lengths scale × input length (f32 bits:
//         not rounded to the output's length when scales are given, as the ONNX reference implementation and the
//         suite compute align_corners and pytorch_half_pixel), 12 cubic_coeff_a (f32 bits), 13 exclude_outside

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

fn src(o: u32, ilen: u32, olen: u32, width: f32, scale: f32) -> f32 {
    let fo = f32(o);
    switch pu(6u) {
        case 4u: {
            let offset = f32(ilen) / 2.0 * (1.0 - f32(olen) / width);
            return offset + (fo + 0.5) / scale - 0.5;
        }
        case 1u: { return fo / scale; }
        case 2u: {
            if (width == 1.0) { return 0.0; }
            return fo * f32(ilen - 1u) / (width - 1.0);
        }
        case 3u: {
            if (width == 1.0) { return -0.5; }
            return (fo + 0.5) / scale - 0.5;
        }
        default: { return (fo + 0.5) / scale - 0.5; }
    }
}

fn nearest(c: f32, len: u32) -> u32 {
    var k: f32;
    switch pu(7u) {
        case 1u: { k = select(round(c), ceil(c), fract(c) == 0.5); }
        case 2u: { k = floor(c); }
        case 3u: { k = ceil(c); }
        default: { k = select(round(c), floor(c), fract(c) == 0.5); }
    }
    return u32(clamp(k, 0.0, f32(len - 1u)));
}

// Keys' cubic convolution kernel with parameter a at distance d >= 0.
fn keys(d: f32, a: f32) -> f32 {
    if (d <= 1.0) { return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0; }
    if (d < 2.0) { return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a; }
    return 0.0;
}

// The first neighbour of coordinate c on an axis of `len` and the weights of the (2 or 4) it reads.
struct Taps { first: i32, w: vec4<f32> }

fn taps(c: f32, len: u32) -> Taps {
    var base = floor(c);
    if (fract(c) == 0.0) { base = c - 1.0; }
    let r = c - base;
    var t: Taps;
    if (pu(5u) == 1u) {
        t.first = i32(base);
        t.w = vec4<f32>(1.0 - r, r, 0.0, 0.0);
    } else {
        let a = pf(12u);
        t.first = i32(base) - 1;
        t.w = vec4<f32>(keys(r + 1.0, a), keys(r, a), keys(1.0 - r, a), keys(2.0 - r, a));
    }
    if (pu(13u) != 0u) {
        var sum = 0.0;
        for (var k = 0; k < 4; k = k + 1) {
            let i = t.first + k;
            if (i < 0 || i >= i32(len)) { t.w[k] = 0.0; }
            sum = sum + t.w[k];
        }
        t.w = t.w / sum;
    }
    return t;
}

fn edge(i: i32, len: u32) -> u32 { return u32(clamp(i, 0, i32(len) - 1)); }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let ih = pu(1u);
    let iw = pu(2u);
    let oh = pu(3u);
    let ow = pu(4u);
    let ox = i % ow;
    let oy = (i / ow) % oh;
    let plane = (i / (ow * oh)) * ih * iw;
    let sy = src(oy, ih, oh, pf(10u), pf(8u));
    let sx = src(ox, iw, ow, pf(11u), pf(9u));
    if (pu(5u) == 0u) {
        y[i] = x[plane + nearest(sy, ih) * iw + nearest(sx, iw)];
        return;
    }
    let ty = taps(sy, ih);
    let tx = taps(sx, iw);
    let n = select(4, 2, pu(5u) == 1u);
    var acc = 0.0;
    for (var a = 0; a < n; a = a + 1) {
        let row = plane + edge(ty.first + a, ih) * iw;
        var line = 0.0;
        for (var b = 0; b < n; b = b + 1) {
            line = line + tx.w[b] * f32(x[row + edge(tx.first + b, iw)]);
        }
        acc = acc + ty.w[a] * line;
    }
    y[i] = TF(acc);
}
