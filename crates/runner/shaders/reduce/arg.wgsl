// ArgMax and ArgMin along one axis: one invocation per output element walks its lane. NaN wins both (the first NaN,
// as numpy and the ONNX reference implementation answer); among equal values the first, or the last with
// select_last_index. The index is written as one u32 per element.
// params: 0 outputs, 1 axis length, 2 inner (elements after the axis), 3 largest (1) or smallest (0),
//         4 select_last_index

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;


@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(id, nwg);
    if (o >= pu(0u)) { return; }
    let len = pu(1u);
    let inner = pu(2u);
    let largest = pu(3u) != 0u;
    let last = pu(4u) != 0u;
    let base = (o / inner) * len * inner + o % inner;
    var best = 0u;
    var bv = f32(x[base]);
    for (var k = 1u; k < len; k = k + 1u) {
        if (is_nan(bv)) { break; }
        let c = f32(x[base + k * inner]);
        var better = is_nan(c);
        if (!better) {
            better = select((c < bv), (c > bv), largest) || (last && c == bv);
        }
        if (better) { best = k; bv = c; }
    }
    y[o] = best;
}
