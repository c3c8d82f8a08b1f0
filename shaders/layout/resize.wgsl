// Resize of the two innermost axes (NCHW images), nearest or bilinear, one invocation per output element.
// params: 0 n, 1 in H, 2 in W, 3 out H, 4 out W, 5 mode (0 nearest, 1 linear),
//         6 coordinate transform (0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel),
//         7 nearest rounding (0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil),
//         8 scale H (f32 bits), 9 scale W (f32 bits), 10 and 11 the resized lengths scale × input length (f32 bits:
//         not rounded to the output's length when scales are given, as the ONNX reference implementation and the
//         suite compute align_corners and pytorch_half_pixel)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

fn src(o: u32, ilen: u32, width: f32, scale: f32) -> f32 {
    let fo = f32(o);
    switch pu(6u) {
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
    let sy = src(oy, ih, pf(10u), pf(8u));
    let sx = src(ox, iw, pf(11u), pf(9u));
    if (pu(5u) == 0u) {
        y[i] = x[plane + nearest(sy, ih) * iw + nearest(sx, iw)];
        return;
    }
    let cy = clamp(sy, 0.0, f32(ih - 1u));
    let cx = clamp(sx, 0.0, f32(iw - 1u));
    let y0 = u32(floor(cy));
    let x0 = u32(floor(cx));
    let y1 = min(y0 + 1u, ih - 1u);
    let x1 = min(x0 + 1u, iw - 1u);
    let fy = cy - f32(y0);
    let fx = cx - f32(x0);
    let v00 = f32(x[plane + y0 * iw + x0]);
    let v01 = f32(x[plane + y0 * iw + x1]);
    let v10 = f32(x[plane + y1 * iw + x0]);
    let v11 = f32(x[plane + y1 * iw + x1]);
    let top = v00 + (v01 - v00) * fx;
    let bot = v10 + (v11 - v10) * fx;
    y[i] = TF(top + (bot - top) * fy);
}
