// Trilu: the upper (j − i ≥ k) or lower (j − i ≤ k) triangle of each matrix of the two innermost axes, zeros elsewhere;
// one invocation per element. params: 0 n, 1 rows, 2 columns, 3 k (i32), 4 upper

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let col = i32(i % pu(2u));
    let row = i32((i / pu(2u)) % pu(1u));
    let d = col - row;
    var keep = d <= pi(3u);
    if (pu(4u) != 0u) { keep = d >= pi(3u); }
    y[i] = select(T(0.0), x[i], keep);
}
