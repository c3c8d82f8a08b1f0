// Reductions over any set of axes: one invocation per output element walks the reduced elements through strides.
// params: 0 n out, 1 R (elements reduced per output), 2 kept rank, 3 reduced rank, 4 op,
//         5..11 kept shape, 11..17 kept strides, 17..23 reduced shape, 23..29 reduced strides
// ops: 0 sum, 1 mean, 2 max, 3 min, 4 sum of squares, 5 L2, 6 L1, 7 log sum, 8 log-sum-exp, 9 product

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let op = pu(4u);
    let base = strided(i, pu(2u), 5u, 11u);
    let rr = pu(3u);
    if (op == 2u || op == 3u) {
        var best = f32(x[base + strided(0u, rr, 17u, 23u)]);
        for (var j = 1u; j < r; j = j + 1u) {
            let v = f32(x[base + strided(j, rr, 17u, 23u)]);
            if (v != v || (op == 2u && v > best) || (op == 3u && v < best)) { best = v; }
        }
        y[i] = T(best);
        return;
    }
    var shift = 0.0;
    if (op == 8u) {
        shift = f32(x[base + strided(0u, rr, 17u, 23u)]);
        for (var j = 1u; j < r; j = j + 1u) { shift = max(shift, f32(x[base + strided(j, rr, 17u, 23u)])); }
    }
    var acc = A(0.0);
    if (op == 9u) { acc = A(1.0); }
    for (var j = 0u; j < r; j = j + 1u) {
        let v = A(x[base + strided(j, rr, 17u, 23u)]);
        switch op {
            case 4u, 5u: { acc = RA(acc + RA(v * v)); }
            case 6u: { acc = RA(acc + abs(v)); }
            case 8u: { acc = RA(acc + A(TF(exp(f32(v) - shift)))); }
            case 9u: { acc = RA(acc * v); }
            default: { acc = RA(acc + v); }
        }
    }
    let s = f32(acc);
    switch op {
        case 1u: { y[i] = TF(s / f32(r)); }
        case 5u: { y[i] = TF(sqrt(s)); }
        case 7u: { y[i] = TF(log(s)); }
        case 8u: { y[i] = TF(log(s) + shift); }
        default: { y[i] = TF(s); }
    }
}
