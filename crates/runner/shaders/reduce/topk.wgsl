// TopK's indices: one invocation per input element counts the elements of its lane that come before it (larger, or
// smaller with largest = 0) and, when that rank is below k, writes its index at that place of the output lane (one
// u32 per element).
// params: 0 n (input elements), 1 axis length, 2 inner (elements after the axis), 3 k, 4 largest

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

// Whether a (at index i) comes before b (at index j): NaN ranks above every number, as the ONNX reference's sort
// puts it (first with largest = 1, last with largest = 0); equal values in index order.
fn before(a: f32, i: u32, b: f32, j: u32) -> bool {
    let an = is_nan(a);
    let bn = is_nan(b);
    if ((an && bn) || (!an && !bn && a == b)) { return i < j; }
    let largest = pu(4u) != 0u;
    if (an) { return largest; }
    if (bn) { return !largest; }
    if (largest) { return a > b; }
    return a < b;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = flat(id, nwg);
    if (e >= pu(0u)) { return; }
    let len = pu(1u);
    let inner = pu(2u);
    let k = pu(3u);
    let outer = e / (len * inner);
    let within = e % inner;
    let i = (e / inner) % len;
    let base = outer * len * inner + within;
    let v = f32(x[e]);
    var rank = 0u;
    for (var j = 0u; j < len; j = j + 1u) {
        if (j != i && before(f32(x[base + j * inner]), j, v, i)) { rank = rank + 1u; }
    }
    if (rank < k) { y[(outer * k + rank) * inner + within] = i; }
}
