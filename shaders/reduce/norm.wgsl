// Normalizations. LayerNormalization over trailing axes and InstanceNormalization over spatial axes: one
// invocation per row, two passes (mean, then the mean of squared deviations) accumulating in A. BatchNormalization
// runs folded into a per-channel affine y = x * s[c] + b[c], as inference runtimes do.
// layernorm params: 0 rows, 1 R, 2 epsilon (f32 bits), 3 has bias; layernorm_stats writes per row the mean
// (params 4 = 0) or the inverse standard deviation (params 4 = 1), the optional outputs of LayerNormalization
// instancenorm params: 0 rows, 1 R, 2 epsilon (f32 bits), 3 channels
// affine params: 0 n, 1 inner, 2 channels

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> s: array<T>;
@group(0) @binding(3) var<storage, read> b: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

// Mean and 1/sqrt(variance + eps) of one row.
fn row_stats(base: u32, r: u32, eps: f32) -> vec2<f32> {
    var sum = A(0.0);
    for (var j = 0u; j < r; j = j + 1u) { sum = RA(sum + A(x[base + j])); }
    let mean = RA(sum / A(f32(r)));
    var sq = A(0.0);
    for (var j = 0u; j < r; j = j + 1u) {
        let d = RA(A(x[base + j]) - mean);
        sq = RA(sq + RA(d * d));
    }
    let var_ = f32(RA(sq / A(f32(r))));
    return vec2<f32>(f32(mean), 1.0 / sqrt(var_ + eps));
}

fn normalize_row(row: u32, r: u32, eps: f32, pc: u32, bias: bool, per_elem: bool) {
    let base = row * r;
    let st = row_stats(base, r, eps);
    let mean = st.x;
    let inv = st.y;
    for (var j = 0u; j < r; j = j + 1u) {
        var k = pc;
        if (per_elem) { k = j; }
        var v = (f32(x[base + j]) - mean) * inv * f32(s[k]);
        if (bias) { v = v + f32(b[k]); }
        y[base + j] = TF(v);
    }
}

@compute @workgroup_size(256)
fn layernorm(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    normalize_row(i, pu(1u), pf(2u), 0u, pu(3u) != 0u, true);
}

@compute @workgroup_size(256)
fn layernorm_stats(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let st = row_stats(i * pu(1u), pu(1u), pf(2u));
    y[i] = TF(st[pu(4u)]);
}

@compute @workgroup_size(256)
fn instancenorm(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    normalize_row(i, pu(1u), pf(2u), i % pu(3u), true, false);
}

@compute @workgroup_size(256)
fn affine(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let c = (i / pu(1u)) % pu(2u);
    y[i] = R(R(x[i] * s[c]) + b[c]);
}
