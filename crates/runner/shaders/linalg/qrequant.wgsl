// QLinearMatMul's requantization, as ONNX Runtime's CPU kernel computes it: the integer product times
// a_scale · b_scale / y_scale (one f32 multiplier), rounded half to even, plus y's zero point, saturated to y's type;
// one u32 word per element. params: 0 n, 1 multiplier (f32 bits), 2 zero point (i32), 3 lowest, 4 highest (i32)

@group(0) @binding(1) var<storage, read> acc: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let v = round(f32(acc[i]) * pf(1u)) + f32(pi(2u));
    y[i] = i32(clamp(v, f32(pi(3u)), f32(pi(4u))));
}
