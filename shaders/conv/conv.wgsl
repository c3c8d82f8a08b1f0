// Direct 2-D convolution and transposed convolution (1-D runs as H = 1), NCHW, groups, dilations, strides, pads,
// one invocation per output element, accumulating in A.
// params: 0 n, 1 Cin, 2 H, 3 W, 4 Cout, 5 OH, 6 OW, 7 KH, 8 KW, 9 stride h, 10 stride w, 11 pad top, 12 pad left,
//         13 dilation h, 14 dilation w, 15 groups, 16 has bias

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> w: array<T>;
@group(0) @binding(3) var<storage, read> bias: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

struct Out { n: u32, co: u32, oy: u32, ox: u32 }

fn out_at(i: u32) -> Out {
    let ow = pu(6u);
    let oh = pu(5u);
    let cout = pu(4u);
    return Out(i / (ow * oh * cout), (i / (ow * oh)) % cout, (i / ow) % oh, i % ow);
}

fn finish(i: u32, co: u32, acc: A) {
    var v = f32(acc);
    if (pu(16u) != 0u) {
        v = v + f32(bias[co]);
    }
    y[i] = TF(v);
}

@compute @workgroup_size(256)
fn conv(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let o = out_at(i);
    let cin = pu(1u);
    let h = i32(pu(2u));
    let wd = i32(pu(3u));
    let kh = pu(7u);
    let kw = pu(8u);
    let cg = cin / pu(15u);
    let og = pu(4u) / pu(15u);
    let g = o.co / og;
    var acc = A(0.0);
    for (var c = 0u; c < cg; c = c + 1u) {
        let ci = g * cg + c;
        let xb = (o.n * cin + ci) * u32(h) * u32(wd);
        let wb = (o.co * cg + c) * kh * kw;
        for (var ky = 0u; ky < kh; ky = ky + 1u) {
            let iy = i32(o.oy * pu(9u) + ky * pu(13u)) - pi(11u);
            if (iy < 0 || iy >= h) { continue; }
            for (var kx = 0u; kx < kw; kx = kx + 1u) {
                let ix = i32(o.ox * pu(10u) + kx * pu(14u)) - pi(12u);
                if (ix < 0 || ix >= wd) { continue; }
                acc = RA(acc + RA(A(x[xb + u32(iy * wd + ix)]) * A(w[wb + ky * kw + kx])));
            }
        }
    }
    finish(i, o.co, acc);
}

@compute @workgroup_size(256)
fn conv_transpose(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let o = out_at(i);
    let cin = pu(1u);
    let h = i32(pu(2u));
    let wd = i32(pu(3u));
    let kh = pu(7u);
    let kw = pu(8u);
    let sh = i32(pu(9u));
    let sw = i32(pu(10u));
    let cg = cin / pu(15u);
    let og = pu(4u) / pu(15u);
    let g = o.co / og;
    let cl = o.co % og;
    var acc = A(0.0);
    for (var c = 0u; c < cg; c = c + 1u) {
        let ci = g * cg + c;
        let xb = (o.n * cin + ci) * u32(h) * u32(wd);
        let wb = (ci * og + cl) * kh * kw;
        for (var ky = 0u; ky < kh; ky = ky + 1u) {
            let ty = i32(o.oy) + pi(11u) - i32(ky * pu(13u));
            if (ty < 0 || ty % sh != 0) { continue; }
            let iy = ty / sh;
            if (iy >= h) { continue; }
            for (var kx = 0u; kx < kw; kx = kx + 1u) {
                let tx = i32(o.ox) + pi(12u) - i32(kx * pu(14u));
                if (tx < 0 || tx % sw != 0) { continue; }
                let ix = tx / sw;
                if (ix >= wd) { continue; }
                acc = RA(acc + RA(A(x[xb + u32(iy * wd + ix)]) * A(w[wb + ky * kw + kx])));
            }
        }
    }
    finish(i, o.co, acc);
}
