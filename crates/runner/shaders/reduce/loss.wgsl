// NegativeLogLikelihoodLoss of scores x [N, C, D] (D: the positions after the class axis, flattened) at integer
// targets [N, D]: loss = −weight[t]·x[n, t, d], 0 (and weight 0) where t is ignore_index. `nll` writes the loss of
// every position; `nll_reduce` runs as one workgroup and writes their sum, or the sum divided by the sum of the
// weights applied (reduction mean), accumulated in A and combined in a tree.
// params: 0 positions (N·D), 1 C, 2 D, 3 has weights, 4 ignore_index (i32), 5 has ignore_index, 6 mean

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> tg: array<i32>;
@group(0) @binding(3) var<storage, read> w: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

var<workgroup> part: array<A, 256>;
var<workgroup> partw: array<A, 256>;

// (loss, weight applied) at position p.
fn at(p: u32) -> vec2<f32> {
    let c = pu(1u);
    let d = pu(2u);
    let t = tg[p];
    if ((pu(5u) != 0u && t == pi(4u)) || t < 0 || u32(t) >= c) { return vec2<f32>(0.0, 0.0); }
    var wt = 1.0;
    if (pu(3u) != 0u) { wt = f32(w[u32(t)]); }
    let v = f32(x[(p / d) * c * d + u32(t) * d + p % d]);
    return vec2<f32>(f32(TF(-v * wt)), wt);
}

@compute @workgroup_size(256)
fn nll(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let p = flat(id, nwg);
    if (p >= pu(0u)) { return; }
    y[p] = T(at(p).x);
}

@compute @workgroup_size(256)
fn nll_reduce(@builtin(local_invocation_index) t: u32) {
    var s = A(0.0);
    var sw = A(0.0);
    for (var p = t; p < pu(0u); p = p + WG) {
        let v = at(p);
        s = RA(s + A(v.x));
        sw = RA(sw + A(v.y));
    }
    part[t] = s;
    partw[t] = sw;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k = k >> 1u) {
        if (t < k) {
            part[t] = RA(part[t] + part[t + k]);
            partw[t] = RA(partw[t] + partw[t + k]);
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        if (pu(6u) != 0u) { y[0] = TF(f32(part[0]) / f32(partw[0])); } else { y[0] = TF(f32(part[0])); }
    }
}
