// Where(cond, x, y) with broadcasting; the condition arrives as one u32 per element.
// params: 0 n, 1 rank, 4..12 output shape, 12..20 strides of cond, 20..28 of x, 28..36 of y

@group(0) @binding(1) var<storage, read> c: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<T>;
@group(0) @binding(3) var<storage, read> b: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let k = c[strided(i, r, 4u, 12u)];
    y[i] = select(b[strided(i, r, 4u, 28u)], a[strided(i, r, 4u, 20u)], k != 0u);
}
