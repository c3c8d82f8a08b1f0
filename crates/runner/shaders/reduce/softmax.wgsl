// Softmax and LogSoftmax along one axis of a tensor viewed as [outer, R, inner], one workgroup per row: the max is
// subtracted first, exponentials are computed in f32 and rounded to T, and their sum accumulates in A (each of the
// 256 invocations sums every 256th element; the partial sums combine in a tree).
// params: 0 n (outer x inner), 1 R, 2 inner, 3 op (0 softmax, 1 log softmax, 2 softmax whose rows of −∞ only
//         give zeros: attention's fully masked rows, as the ONNX reference implementation computes them)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

var<workgroup> part: array<A, 256>;
var<workgroup> partf: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let i = row_of(wg, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let inner = pu(2u);
    let base = (i / inner) * r * inner + i % inner;
    var m = f32(x[base]);
    for (var j = t; j < r; j = j + WG) { m = max(m, f32(x[base + j * inner])); }
    partf[t] = m;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) { partf[t] = max(partf[t], partf[t + s]); }
        workgroupBarrier();
    }
    m = partf[0];
    var acc = A(0.0);
    for (var j = t; j < r; j = j + WG) {
        acc = RA(acc + A(TF(exp(f32(x[base + j * inner]) - m))));
    }
    part[t] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) { part[t] = RA(part[t] + part[t + s]); }
        workgroupBarrier();
    }
    let sum = f32(part[0]);
    let masked = pu(3u) == 2u && bitcast<u32>(m) == 0xff800000u;
    for (var j = t; j < r; j = j + WG) {
        let d = f32(x[base + j * inner]) - m;
        if (masked) {
            y[base + j * inner] = T(0.0);
        } else if (pu(3u) == 1u) {
            y[base + j * inner] = TF(d - log(sum));
        } else {
            y[base + j * inner] = TF(f32(TF(exp(d))) / sum);
        }
    }
}
