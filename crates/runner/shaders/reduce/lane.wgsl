// Ops along one axis that every output element reads whole, one invocation per output element: the running sum or
// product (CumSum, CumProd: exclusive and reverse, accumulated in A in the lane's order) and Hardmax (1 at the
// first largest element, or at the first NaN, as the ONNX reference implementation answers; 0 elsewhere), and
// LpNormalization.
// params: 0 n, 1 axis length, 2 inner (elements after the axis), 3 exclusive, 4 reverse, 5 product, 6 p (lpnorm)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

fn lane_base(o: u32) -> u32 {
    let len = pu(1u);
    let inner = pu(2u);
    return (o / (len * inner)) * len * inner + o % inner;
}

@compute @workgroup_size(256)
fn cumulative(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let len = pu(1u);
    let inner = pu(2u);
    let base = lane_base(o);
    let k = (o / inner) % len;
    let product = pu(5u) != 0u;
    var acc = select(A(0.0), A(1.0), product);
    for (var s = 0u; s < len; s = s + 1u) {
        var j = s;
        if (pu(4u) != 0u) { j = len - 1u - s; }
        let reached = j == k;
        if (reached && pu(3u) != 0u) { break; }
        let v = A(x[base + j * inner]);
        if (product) { acc = RA(acc * v); } else { acc = RA(acc + v); }
        if (reached) { break; }
    }
    y[o] = T(acc);
}

@compute @workgroup_size(256)
fn hardmax(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let len = pu(1u);
    let inner = pu(2u);
    let base = lane_base(o);
    var best = 0u;
    var bv = f32(x[base]);
    for (var j = 1u; j < len; j = j + 1u) {
        if (is_nan(bv)) { break; }
        let c = f32(x[base + j * inner]);
        if (is_nan(c) || c > bv) { best = j; bv = c; }
    }
    y[o] = select(T(0.0), T(1.0), best == (o / inner) % len);
}

// LpNormalization: x divided by the lane's L1 (params 6 = 1) or L2 (params 6 = 2) norm, summed in A; a lane of
// zeros stays zero, as the spec's reference implementation computes it.
@compute @workgroup_size(256)
fn lpnorm(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let len = pu(1u);
    let inner = pu(2u);
    let base = lane_base(o);
    var acc = A(0.0);
    for (var j = 0u; j < len; j = j + 1u) {
        let v = A(x[base + j * inner]);
        if (pu(6u) == 1u) { acc = RA(acc + abs(v)); } else { acc = RA(acc + RA(v * v)); }
    }
    var norm = f32(acc);
    if (pu(6u) != 1u) { norm = sqrt(norm); }
    if (norm == 0.0) { norm = 1.0; }
    y[o] = TF(f32(x[o]) / norm);
}

// LRN across channels (the axis): x / (bias + alpha / size · Σ x²)^beta, the sum over the channels from
// c − ⌊(size − 1) / 2⌋ to c + ⌈(size − 1) / 2⌉ that exist. params: 7 size, 8 alpha, 9 beta, 10 bias (f32 bits)
@compute @workgroup_size(256)
fn lrn(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let len = i32(pu(1u));
    let inner = pu(2u);
    let base = lane_base(o);
    let c = i32((o / inner) % pu(1u));
    let size = i32(pu(7u));
    let lo = max(0, c - (size - 1) / 2);
    let hi = min(len - 1, c + size / 2);
    var acc = A(0.0);
    for (var j = lo; j <= hi; j = j + 1) {
        let v = A(x[base + u32(j) * inner]);
        acc = RA(acc + RA(v * v));
    }
    let d = pf(10u) + pf(8u) / f32(size) * f32(acc);
    y[o] = TF(f32(x[o]) / pow(d, pf(9u)));
}
