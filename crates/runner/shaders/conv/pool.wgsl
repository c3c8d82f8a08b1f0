// MaxPool, AveragePool and LpPool over up to three spatial axes (fewer run with leading extents of 1), one
// invocation per output element.
// params: 0 n, 1-3 D H W, 4-6 OD OH OW, 7-9 kernel, 10-12 strides, 13-15 pads begin, 16-18 dilations,
//         19-21 pads end, 22 count_include_pad, 23 p (f32 bits, LpPool)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

// Where output element i's window starts along each axis (may be negative: padding) and its plane's offset.
struct Win { base: u32, z: i32, y: i32, x: i32 }

fn window(i: u32) -> Win {
    let ox = i % pu(6u);
    let oy = (i / pu(6u)) % pu(5u);
    let oz = (i / (pu(6u) * pu(5u))) % pu(4u);
    let plane = i / (pu(6u) * pu(5u) * pu(4u));
    return Win(plane * pu(1u) * pu(2u) * pu(3u), i32(oz * pu(10u)) - pi(13u), i32(oy * pu(11u)) - pi(14u),
               i32(ox * pu(12u)) - pi(15u));
}

// The input offset of window tap (kz, ky, kx), or -1 where it falls in the padding.
fn tap(w: Win, kz: u32, ky: u32, kx: u32) -> i32 {
    let iz = w.z + i32(kz * pu(16u));
    let iy = w.y + i32(ky * pu(17u));
    let ix = w.x + i32(kx * pu(18u));
    if (iz < 0 || iz >= pi(1u) || iy < 0 || iy >= pi(2u) || ix < 0 || ix >= pi(3u)) { return -1; }
    return (iz * pi(2u) + iy) * pi(3u) + ix;
}

@compute @workgroup_size(256)
fn maxpool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let w = window(i);
    var best = f32(-3.4028235e38);
    var seen = false;
    for (var kz = 0u; kz < pu(7u); kz = kz + 1u) {
        for (var ky = 0u; ky < pu(8u); ky = ky + 1u) {
            for (var kx = 0u; kx < pu(9u); kx = kx + 1u) {
                let t = tap(w, kz, ky, kx);
                if (t < 0) { continue; }
                let v = f32(x[w.base + u32(t)]);
                if (!seen || v > best || v != v) { best = v; }
                seen = true;
            }
        }
    }
    y[i] = T(best);
}

// How many of the window's taps along one axis land inside the padded input (count_include_pad's divisor).
fn taps(start: i32, k: u32, dil: u32, len: u32, pad_begin: u32, pad_end: u32) -> i32 {
    var c = 0;
    for (var t = 0u; t < k; t = t + 1u) {
        let at = start + i32(t * dil);
        if (at >= -i32(pad_begin) && at < i32(len + pad_end)) { c = c + 1; }
    }
    return c;
}

@compute @workgroup_size(256)
fn avgpool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let w = window(i);
    var acc = A(0.0);
    var cnt = 0u;
    for (var kz = 0u; kz < pu(7u); kz = kz + 1u) {
        for (var ky = 0u; ky < pu(8u); ky = ky + 1u) {
            for (var kx = 0u; kx < pu(9u); kx = kx + 1u) {
                let t = tap(w, kz, ky, kx);
                if (t < 0) { continue; }
                acc = RA(acc + A(x[w.base + u32(t)]));
                cnt = cnt + 1u;
            }
        }
    }
    var div = f32(cnt);
    if (pu(22u) != 0u) {
        div = f32(taps(w.z, pu(7u), pu(16u), pu(1u), pu(13u), pu(19u))
            * taps(w.y, pu(8u), pu(17u), pu(2u), pu(14u), pu(20u))
            * taps(w.x, pu(9u), pu(18u), pu(3u), pu(15u), pu(21u)));
    }
    y[i] = TF(f32(acc) / max(div, 1.0));
}

// LpPool: (sum of |x|^p over the window)^(1/p), padding reading zeros.
@compute @workgroup_size(256)
fn lppool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let w = window(i);
    let p = pf(23u);
    var acc = A(0.0);
    for (var kz = 0u; kz < pu(7u); kz = kz + 1u) {
        for (var ky = 0u; ky < pu(8u); ky = ky + 1u) {
            for (var kx = 0u; kx < pu(9u); kx = kx + 1u) {
                let t = tap(w, kz, ky, kx);
                if (t < 0) { continue; }
                let v = abs(f32(x[w.base + u32(t)]));
                var e = pow(v, p);
                if (p == 2.0) { e = v * v; } else if (p == 1.0) { e = v; }
                acc = RA(acc + A(TF(e)));
            }
        }
    }
    var r = pow(f32(acc), 1.0 / p);
    if (p == 2.0) { r = sqrt(f32(acc)); } else if (p == 1.0) { r = f32(acc); }
    y[i] = TF(r);
}
