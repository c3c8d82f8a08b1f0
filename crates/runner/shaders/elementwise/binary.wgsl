// Binary element-wise ops with NumPy broadcasting (stride 0 on broadcast dims), picked by an op code.
// params: 0 n, 1 rank, 2 op, 3 first output element of this chunk, 4..12 output shape, 12..20 strides of a,
//         20..28 strides of b, 28 and 29 the first element of a and of b bound (tensors beyond the binding limit
//         run in chunks). Max and Min propagate NaN, as numpy and the spec's reference implementation do.

@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;

fn pow32(x: f32, e: f32) -> f32 {
    if (e == 2.0) { return x * x; }
    if (e == 1.0) { return x; }
    if (e == 0.5) { return sqrt(x); }
    if (e == 0.0) { return 1.0; }
    if (x < 0.0 && e == round(e)) {
        let m = pow(-x, e);
        return select(m, -m, (abs(e) % 2.0) == 1.0);
    }
    return pow(x, e);
}

fn bin(u: T, v: T, op: u32) -> T {
    switch op {
        case 0u: { return R(u + v); }
        case 1u: { return R(u - v); }
        case 2u: { return R(u * v); }
        case 3u: { return R(u / v); }
        case 4u: { return TF(pow32(f32(u), f32(v))); }
        case 5u: { return select(max(u, v), R(u + v), is_nan(f32(u)) || is_nan(f32(v))); }
        case 6u: { return select(min(u, v), R(u + v), is_nan(f32(u)) || is_nan(f32(v))); }
        case 7u: { return select(u, R(u * v), u < T(0.0)); }
        case 8u: { return TF(f32(u) - f32(v) * trunc(f32(u) / f32(v))); }
        default: { return u; }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let g = i + pu(3u);
    y[i] = bin(a[strided(g, r, 4u, 12u) - pi(28u)], b[strided(g, r, 4u, 20u) - pi(29u)], pu(2u));
}
