// Normalizations. LayerNormalization over trailing axes and InstanceNormalization over spatial axes: one workgroup
// per row, two passes (the mean, then the mean of squared deviations), each invocation summing every 256th element
// in A and the partial sums combined in a tree. BatchNormalization runs folded into a per-channel affine
// y = x * s[c] + b[c], as inference runtimes do.
// layernorm params: 0 rows, 1 R, 2 epsilon (f32 bits), 3 has bias, 5 RMSNormalization (no centering: the row is
// divided by its root mean square); layernorm_stats writes per row the mean (params 4 = 0) or the inverse standard
// deviation (params 4 = 1), the optional outputs of LayerNormalization
// instancenorm params: 0 rows, 1 R, 2 epsilon (f32 bits), 3 channels
// affine params: 0 n, 1 inner, 2 channels

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> s: array<T>;
@group(0) @binding(3) var<storage, read> b: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

var<workgroup> part: array<A, 256>;

fn tree_sum(t: u32, v: A) -> A {
    part[t] = v;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k = k >> 1u) {
        if (t < k) { part[t] = RA(part[t] + part[t + k]); }
        workgroupBarrier();
    }
    let r = part[0];
    workgroupBarrier();
    return r;
}

// Mean and 1/sqrt(variance + eps) of one row; with `rms`, a mean of 0 and 1/sqrt(mean of squares + eps).
fn row_stats(t: u32, base: u32, r: u32, eps: f32, rms: bool) -> vec2<f32> {
    var mean = A(0.0);
    if (!rms) {
        var sum = A(0.0);
        for (var j = t; j < r; j = j + WG) { sum = RA(sum + A(x[base + j])); }
        mean = RA(tree_sum(t, sum) / A(f32(r)));
    }
    var sq = A(0.0);
    for (var j = t; j < r; j = j + WG) {
        let d = RA(A(x[base + j]) - mean);
        sq = RA(sq + RA(d * d));
    }
    let var_ = f32(RA(tree_sum(t, sq) / A(f32(r))));
    return vec2<f32>(f32(mean), 1.0 / sqrt(var_ + eps));
}

fn normalize_row(t: u32, row: u32, r: u32, eps: f32, pc: u32, bias: bool, per_elem: bool, rms: bool) {
    let base = row * r;
    let st = row_stats(t, base, r, eps, rms);
    for (var j = t; j < r; j = j + WG) {
        var k = pc;
        if (per_elem) { k = j; }
        var v = (f32(x[base + j]) - st.x) * st.y * f32(s[k]);
        if (bias) { v = v + f32(b[k]); }
        y[base + j] = TF(v);
    }
}

@compute @workgroup_size(256)
fn layernorm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    normalize_row(t, i, pu(1u), pf(2u), 0u, pu(3u) != 0u, true, pu(5u) != 0u);
}

@compute @workgroup_size(256)
fn layernorm_stats(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    let st = row_stats(t, i * pu(1u), pu(1u), pf(2u), pu(5u) != 0u);
    if (t == 0u) { y[i] = TF(st[pu(4u)]); }
}

@compute @workgroup_size(256)
fn instancenorm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    normalize_row(t, i, pu(1u), pf(2u), i % pu(3u), true, false, false);
}

@compute @workgroup_size(256)
fn affine(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let c = (i / pu(1u)) % pu(2u);
    y[i] = R(R(x[i] * s[c]) + b[c]);
}

// GroupNormalization: one row per (n, group) of R = channels per group × spatial elements, normalized, then scaled
// and shifted per channel (opset 21) or per group (opset 18).
// groupnorm params: 0 rows, 1 R, 2 epsilon (f32 bits), 3 groups, 4 spatial, 5 per channel, 6 channels per group
@compute @workgroup_size(256)
fn groupnorm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let base = i * r;
    let st = row_stats(t, base, r, pf(2u), false);
    let g = i % pu(3u);
    for (var j = t; j < r; j = j + WG) {
        var k = g;
        if (pu(5u) != 0u) { k = g * pu(6u) + j / pu(4u); }
        y[base + j] = TF((f32(x[base + j]) - st.x) * st.y * f32(s[k]) + f32(b[k]));
    }
}
