// Strided copy: y[out_off + strided_out(i)] = x[in_off + strided_in(i)] over an iteration shape. One shader for
// Transpose, Slice (negative steps too), Expand, Concat (each input scattered into the output), Split and Tile.
// params: 0 n, 1 rank, 2 input offset, 3 output offset, 4..12 iteration shape, 12..20 input strides, 20..28 output strides

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    y[pi(3u) + strided(i, r, 4u, 20u)] = x[pi(2u) + strided(i, r, 4u, 12u)];
}
