// Reductions over any set of axes: one workgroup per output element; its 256 invocations each walk every 256th
// reduced element (through strides), then combine their partial results in a tree.
// params: 0 n out, 1 R (elements reduced per output), 2 kept rank, 3 reduced rank, 4 op,
//         5..11 kept shape, 11..17 kept strides, 17..23 reduced shape, 23..29 reduced strides
// ops: 0 sum, 1 mean, 2 max, 3 min, 4 sum of squares, 5 L2, 6 L1, 7 log sum, 8 log-sum-exp, 9 product
// Over an empty set (R = 0) each gives its identity, as the spec states: 0, or 1 for the product, −∞ for max, log
// sum and log-sum-exp, +∞ for min, NaN for the mean (0 / 0).

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

var<workgroup> part: array<A, 256>;
var<workgroup> partf: array<f32, 256>;

fn tree(t: u32, v: A, op: u32) -> A {
    part[t] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) {
            if (op == 9u) { part[t] = RA(part[t] * part[t + s]); } else { part[t] = RA(part[t] + part[t + s]); }
        }
        workgroupBarrier();
    }
    let r = part[0];
    workgroupBarrier();
    return r;
}

// Max (or min) of the workgroup's values; NaN wins.
fn tree_f(t: u32, v: f32, want_max: bool) -> f32 {
    partf[t] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) {
            let a = partf[t];
            let b = partf[t + s];
            if (is_nan(b) || (want_max && b > a) || (!want_max && b < a)) { partf[t] = b; }
        }
        workgroupBarrier();
    }
    let r = partf[0];
    workgroupBarrier();
    return r;
}

fn empty(op: u32) -> f32 {
    switch op {
        case 1u: { return bitcast<f32>(0x7fc00000u); }
        case 2u, 7u, 8u: { return bitcast<f32>(0xff800000u); }
        case 3u: { return bitcast<f32>(0x7f800000u); }
        case 9u: { return 1.0; }
        default: { return 0.0; }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let op = pu(4u);
    let base = strided(i, pu(2u), 5u, 11u);
    let rr = pu(3u);
    if (r == 0u) {
        if (t == 0u) { y[i] = T(empty(op)); }
        return;
    }
    let first = f32(x[base + strided(0u, rr, 17u, 23u)]);
    if (op == 2u || op == 3u) {
        var best = first;
        for (var j = t; j < r; j = j + WG) {
            let v = f32(x[base + strided(j, rr, 17u, 23u)]);
            if (is_nan(v) || (op == 2u && v > best) || (op == 3u && v < best)) { best = v; }
        }
        let m = tree_f(t, best, op == 2u);
        if (t == 0u) { y[i] = T(m); }
        return;
    }
    var shift = 0.0;
    if (op == 8u) {
        var m = first;
        for (var j = t; j < r; j = j + WG) { m = max(m, f32(x[base + strided(j, rr, 17u, 23u)])); }
        shift = tree_f(t, m, true);
    }
    var acc = A(0.0);
    if (op == 9u) { acc = A(1.0); }
    for (var j = t; j < r; j = j + WG) {
        let v = A(x[base + strided(j, rr, 17u, 23u)]);
        switch op {
            case 4u, 5u: { acc = RA(acc + RA(v * v)); }
            case 6u: { acc = RA(acc + abs(v)); }
            case 8u: { acc = RA(acc + A(TF(exp(f32(v) - shift)))); }
            case 9u: { acc = RA(acc * v); }
            default: { acc = RA(acc + v); }
        }
    }
    let s = f32(tree(t, acc, op));
    if (t != 0u) { return; }
    switch op {
        case 1u: { y[i] = TF(s / f32(r)); }
        case 5u: { y[i] = TF(sqrt(s)); }
        case 7u: { y[i] = TF(log(s)); }
        case 8u: { y[i] = TF(log(s) + shift); }
        default: { y[i] = TF(s); }
    }
}
