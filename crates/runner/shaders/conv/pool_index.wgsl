// MaxPool's Indices output: where in the input each window's maximum lies (the first of equal maxima, NaN winning),
// as a flat index over the whole input, row-major within a plane or column-major with storage_order = 1; one u32
// per element. The window walk is pool.wgsl's; params as there, plus 24 storage_order.

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

struct Win { base: u32, z: i32, y: i32, x: i32 }

fn window(i: u32) -> Win {
    let ox = i % pu(6u);
    let oy = (i / pu(6u)) % pu(5u);
    let oz = (i / (pu(6u) * pu(5u))) % pu(4u);
    let plane = i / (pu(6u) * pu(5u) * pu(4u));
    return Win(plane * pu(1u) * pu(2u) * pu(3u), i32(oz * pu(10u)) - pi(13u), i32(oy * pu(11u)) - pi(14u),
               i32(ox * pu(12u)) - pi(15u));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let w = window(i);
    var best = f32(-3.4028235e38);
    var at = 0u;
    var seen = false;
    for (var kz = 0u; kz < pu(7u); kz = kz + 1u) {
        let iz = w.z + i32(kz * pu(16u));
        if (iz < 0 || iz >= pi(1u)) { continue; }
        for (var ky = 0u; ky < pu(8u); ky = ky + 1u) {
            let iy = w.y + i32(ky * pu(17u));
            if (iy < 0 || iy >= pi(2u)) { continue; }
            for (var kx = 0u; kx < pu(9u); kx = kx + 1u) {
                let ix = w.x + i32(kx * pu(18u));
                if (ix < 0 || ix >= pi(3u)) { continue; }
                let v = f32(x[w.base + u32((iz * pi(2u) + iy) * pi(3u) + ix)]);
                if (seen && !(v > best) && v == v) { continue; }
                if (seen && best != best) { continue; }
                best = v;
                seen = true;
                var within = u32((iz * pi(2u) + iy) * pi(3u) + ix);
                if (pu(24u) != 0u) { within = u32(iz + pi(1u) * (iy + pi(2u) * ix)); }
                at = w.base + within;
            }
        }
    }
    y[i] = at;
}
