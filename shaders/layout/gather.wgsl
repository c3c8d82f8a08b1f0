// Gather along one axis: the data viewed as [outer, dim, inner], the indices (i32, negative from the end) flattened.
// params: 0 n, 1 inner, 2 number of indices, 3 dim

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let inner = pu(1u);
    let nidx = pu(2u);
    let dim = pi(3u);
    let e = i % inner;
    let j = (i / inner) % nidx;
    let outer = i / (inner * nidx);
    var k = idx[j];
    if (k < 0) { k = k + dim; }
    k = clamp(k, 0, dim - 1);
    y[i] = x[(outer * u32(dim) + u32(k)) * inner + e];
}
