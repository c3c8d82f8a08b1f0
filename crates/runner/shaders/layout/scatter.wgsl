// ScatterElements and ScatterND, one invocation per output element: the data's value, then every update aimed at
// that element applied in the updates' order (none: replaced; add, mul, max, min: combined), so duplicate indices
// give what a sequential loop gives. Each invocation walks every update: the op side bounds the work.
// params: 0 n, 1 rank, 2 axis (elements), 3 updates m, 4 reduction (0 none, 1 add, 2 mul, 3 max, 4 min),
//         5 k (nd: the index tuple's length), 6 slice (nd: elements per index tuple), 8..16 data shape,
//         16..24 indices shape (elements)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read> upd: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

fn combine(a: T, b: T) -> T {
    switch pu(4u) {
        case 1u: { return R(a + b); }
        case 2u: { return R(a * b); }
        case 3u: { return max(a, b); }
        case 4u: { return min(a, b); }
        default: { return b; }
    }
}

fn norm(i: i32, dim: u32) -> u32 {
    if (i < 0) { return u32(i + i32(dim)); }
    return u32(i);
}

@compute @workgroup_size(256)
fn elements(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let rank = pu(1u);
    let ax = pu(2u);
    var v = x[o];
    for (var u = 0u; u < pu(3u); u = u + 1u) {
        // Walk the output's and the update's coordinates together, innermost first.
        var ro = o;
        var ru = u;
        var hit = true;
        for (var d = i32(rank) - 1; d >= 0; d = d - 1) {
            let nd = pu(8u + u32(d));
            let ni = pu(16u + u32(d));
            var cu = ru % ni;
            if (u32(d) == ax) { cu = norm(idx[u], nd); }
            if (cu != ro % nd) { hit = false; break; }
            ro = ro / nd;
            ru = ru / ni;
        }
        if (hit) { v = combine(v, upd[u]); }
    }
    y[o] = v;
}

@compute @workgroup_size(256)
fn nd(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let k = pu(5u);
    let slice = pu(6u);
    let q = o / slice;
    var v = x[o];
    for (var u = 0u; u < pu(3u); u = u + 1u) {
        var t = 0u;
        for (var d = 0u; d < k; d = d + 1u) {
            let dim = pu(8u + d);
            t = t * dim + norm(idx[u * k + d], dim);
        }
        if (t == q) { v = combine(v, upd[u * slice + o % slice]); }
    }
    y[o] = v;
}
