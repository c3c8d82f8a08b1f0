// MaxPool, AveragePool and LpPool over the two innermost axes (1-D runs as H = 1), one invocation per output element.
// params: 0 n, 1 H, 2 W, 3 OH, 4 OW, 5 KH, 6 KW, 7 stride h, 8 stride w, 9 pad top, 10 pad left,
//         11 dilation h, 12 dilation w, 13 count_include_pad, 14 pad bottom, 15 pad right

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn maxpool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let h = i32(pu(1u));
    let w = i32(pu(2u));
    let ow = pu(4u);
    let oh = pu(3u);
    let ox = i % ow;
    let oy = (i / ow) % oh;
    let base = (i / (ow * oh)) * u32(h * w);
    var best = f32(-3.4028235e38);
    var seen = false;
    for (var ky = 0u; ky < pu(5u); ky = ky + 1u) {
        let iy = i32(oy * pu(7u) + ky * pu(11u)) - pi(9u);
        if (iy < 0 || iy >= h) { continue; }
        for (var kx = 0u; kx < pu(6u); kx = kx + 1u) {
            let ix = i32(ox * pu(8u) + kx * pu(12u)) - pi(10u);
            if (ix < 0 || ix >= w) { continue; }
            let v = f32(x[base + u32(iy * w + ix)]);
            if (!seen || v > best || v != v) { best = v; }
            seen = true;
        }
    }
    y[i] = T(best);
}

@compute @workgroup_size(256)
fn avgpool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let h = i32(pu(1u));
    let w = i32(pu(2u));
    let ow = pu(4u);
    let oh = pu(3u);
    let ox = i % ow;
    let oy = (i / ow) % oh;
    let base = (i / (ow * oh)) * u32(h * w);
    let y0 = i32(oy * pu(7u)) - pi(9u);
    let x0 = i32(ox * pu(8u)) - pi(10u);
    let y1 = min(y0 + i32((pu(5u) - 1u) * pu(11u)) + 1, h + pi(14u));
    let x1 = min(x0 + i32((pu(6u) - 1u) * pu(12u)) + 1, w + pi(15u));
    var acc = A(0.0);
    var cnt = 0u;
    for (var ky = 0u; ky < pu(5u); ky = ky + 1u) {
        let iy = y0 + i32(ky * pu(11u));
        if (iy < 0 || iy >= h) { continue; }
        for (var kx = 0u; kx < pu(6u); kx = kx + 1u) {
            let ix = x0 + i32(kx * pu(12u));
            if (ix < 0 || ix >= w) { continue; }
            acc = RA(acc + A(x[base + u32(iy * w + ix)]));
            cnt = cnt + 1u;
        }
    }
    var div = f32(cnt);
    if (pu(13u) != 0u) { div = f32((y1 - y0) * (x1 - x0)); }
    y[i] = TF(f32(acc) / max(div, 1.0));
}

// LpPool: (sum of |x|^p over the window)^(1/p), padding reading zeros; params 16: p (f32 bits).
@compute @workgroup_size(256)
fn lppool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let h = i32(pu(1u));
    let w = i32(pu(2u));
    let ow = pu(4u);
    let oh = pu(3u);
    let ox = i % ow;
    let oy = (i / ow) % oh;
    let base = (i / (ow * oh)) * u32(h * w);
    let p = pf(16u);
    var acc = A(0.0);
    for (var ky = 0u; ky < pu(5u); ky = ky + 1u) {
        let iy = i32(oy * pu(7u) + ky * pu(11u)) - pi(9u);
        if (iy < 0 || iy >= h) { continue; }
        for (var kx = 0u; kx < pu(6u); kx = kx + 1u) {
            let ix = i32(ox * pu(8u) + kx * pu(12u)) - pi(10u);
            if (ix < 0 || ix >= w) { continue; }
            let v = abs(f32(x[base + u32(iy * w + ix)]));
            var e = pow(v, p);
            if (p == 2.0) { e = v * v; } else if (p == 1.0) { e = v; }
            acc = RA(acc + A(TF(e)));
        }
    }
    var r = pow(f32(acc), 1.0 / p);
    if (p == 2.0) { r = sqrt(f32(acc)); } else if (p == 1.0) { r = f32(acc); }
    y[i] = TF(r);
}
