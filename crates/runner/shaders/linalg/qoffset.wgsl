// A quantized operand's offsets from its zero point, q − zp, as floats (exact: |q − zp| ≤ 510), for QLinearMatMul's
// integer product. params: 0 n, 1 zero point (i32)

@group(0) @binding(1) var<storage, read> q: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    y[i] = T(f32(q[i] - pi(1u)));
}
