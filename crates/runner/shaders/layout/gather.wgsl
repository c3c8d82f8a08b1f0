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

// GatherElements: y has the indices' shape; y[..., j, ...] = x[..., idx[..., j, ...], ...] along the axis.
// params: 0 n, 1 rank, 2 axis, 3 dim (the data's length along the axis), 4..12 the indices' shape,
//         12..20 the data's strides
@compute @workgroup_size(256)
fn elements(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let rank = pu(1u);
    let ax = pu(2u);
    let dim = pi(3u);
    var k = idx[i];
    if (k < 0) { k = k + dim; }
    k = clamp(k, 0, dim - 1);
    var r = i;
    var o = 0i;
    for (var d = i32(rank) - 1; d >= 0; d = d - 1) {
        let n = pu(4u + u32(d));
        var c = i32(r % n);
        if (u32(d) == ax) { c = k; }
        o = o + c * pi(12u + u32(d));
        r = r / n;
    }
    y[i] = x[o];
}
