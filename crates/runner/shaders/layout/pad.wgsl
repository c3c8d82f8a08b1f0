// Pad in constant, reflect or edge mode, one invocation per output element.
// params: 0 n, 1 rank, 2 mode (0 constant, 1 reflect, 2 edge), 3 constant (f32 bits),
//         4..12 output shape, 12..20 leading pads (i32), 20..28 input shape, 28..36 input strides

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let rank = pu(1u);
    let mode = pu(2u);
    var r = i;
    var o = 0i;
    var inside = true;
    for (var d = i32(rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let n = pu(4u + du);
        var c = i32(r % n) - pi(12u + du);
        r = r / n;
        let len = i32(pu(20u + du));
        if (c < 0 || c >= len) {
            if (mode == 0u) {
                inside = false;
            } else if (mode == 1u) {
                let period = max(2 * len - 2, 1);
                c = abs(c) % period;
                if (c >= len) { c = period - c; }
            } else {
                c = clamp(c, 0, len - 1);
            }
        }
        o = o + c * pi(28u + du);
    }
    if (inside) {
        y[i] = x[o];
    } else {
        y[i] = T(pf(3u));
    }
}
