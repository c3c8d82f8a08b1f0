// Softmax and LogSoftmax along one axis of a tensor viewed as [outer, R, inner]; the max is subtracted first,
// exponentials are computed in f32 and rounded to T, and their sum accumulates in A.
// params: 0 n (outer x inner), 1 R, 2 inner, 3 op (0 softmax, 1 log softmax)

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let inner = pu(2u);
    let base = (i / inner) * r * inner + i % inner;
    var m = f32(x[base]);
    for (var j = 1u; j < r; j = j + 1u) { m = max(m, f32(x[base + j * inner])); }
    var acc = A(0.0);
    for (var j = 0u; j < r; j = j + 1u) {
        acc = RA(acc + A(TF(exp(f32(x[base + j * inner]) - m))));
    }
    let s = f32(acc);
    for (var j = 0u; j < r; j = j + 1u) {
        let d = f32(x[base + j * inner]) - m;
        if (pu(3u) == 1u) {
            y[base + j * inner] = TF(d - log(s));
        } else {
            y[base + j * inner] = TF(f32(TF(exp(d))) / s);
        }
    }
}
