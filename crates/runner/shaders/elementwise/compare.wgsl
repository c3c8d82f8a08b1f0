// Comparisons and classifications of floats with a boolean result (one u32 per element, 1 for true), with NumPy
// broadcasting like binary.wgsl. NaN compares unequal and unordered to everything, as IEEE 754 and the ONNX spec say;
// it is recognised by its bits, which no compiler folds away.
// params: 0 n, 1 rank, 2 op, 4..12 output shape, 12..20 strides of a, 20..28 strides of b
// ops: 0 Equal, 1 Less, 2 Greater, 3 LessOrEqual, 4 GreaterOrEqual, 5 IsNaN (a alone), 6 IsInf (a alone;
//      params 30: detect +inf, 31: detect -inf), 7 true everywhere (Dropout's mask at inference)

@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

fn is_inf(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) == 0x7f800000u; }

fn cmp(u: f32, v: f32, op: u32) -> bool {
    if (op == 7u) { return true; }
    if (op == 5u) { return is_nan(u); }
    if (op == 6u) {
        return is_inf(u) && ((u > 0.0 && pu(30u) != 0u) || (u < 0.0 && pu(31u) != 0u));
    }
    if (is_nan(u) || is_nan(v)) { return false; }
    switch op {
        case 0u: { return u == v; }
        case 1u: { return u < v; }
        case 2u: { return u > v; }
        case 3u: { return u <= v; }
        default: { return u >= v; }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let u = f32(a[strided(i, r, 4u, 12u)]);
    let v = f32(b[strided(i, r, 4u, 20u)]);
    y[i] = select(0u, 1u, cmp(u, v, pu(2u)));
}
