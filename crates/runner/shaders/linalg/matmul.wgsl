// Batched matrix product Y = alpha * A x B + beta * C (MatMul, Gemm): 64x64 output tiles, 16 deep, each of the
// 256 invocations holds a 4x4 block of accumulators of type A (f32, or f16 under `--accumulate f16`).
// params: 0 M, 1 N, 2 K, 3 batch rank, 4 A row stride, 5 A col stride, 6 B row stride, 7 B col stride,
//         8..14 batch shape, 14..20 A batch strides, 20..26 B batch strides, 26 has C, 27 alpha, 28 beta,
//         29 C row stride, 30 C col stride

@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read> c: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

var<workgroup> ta: array<array<T, 64>, 16>;
var<workgroup> tb: array<array<T, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = pu(0u);
    let n = pu(1u);
    let k = pu(2u);
    let ab = strided(wg.z, pu(3u), 8u, 14u);
    let bb = strided(wg.z, pu(3u), 8u, 20u);
    let ars = pi(4u);
    let acs = pi(5u);
    let brs = pi(6u);
    let bcs = pi(7u);
    let row0 = wg.y * 64u;
    let col0 = wg.x * 64u;
    let t = lid.y * 16u + lid.x;
    var acc: array<array<A, 4>, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) { acc[i][j] = A(0.0); }
    }
    for (var k0 = 0u; k0 < k; k0 = k0 + 16u) {
        for (var l = 0u; l < 4u; l = l + 1u) {
            let e = t + l * 256u;
            let kk = e / 64u;
            let mm = e % 64u;
            let ka = k0 + kk;
            var va = T(0.0);
            if (row0 + mm < m && ka < k) { va = a[ab + i32(row0 + mm) * ars + i32(ka) * acs]; }
            ta[kk][mm] = va;
            var vb = T(0.0);
            if (col0 + mm < n && ka < k) { vb = b[bb + i32(ka) * brs + i32(col0 + mm) * bcs]; }
            tb[kk][mm] = vb;
        }
        workgroupBarrier();
        let kn = min(16u, k - k0);
        for (var kk = 0u; kk < kn; kk = kk + 1u) {
            var av: array<A, 4>;
            var bv: array<A, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                av[i] = A(ta[kk][lid.y * 4u + i]);
                bv[i] = A(tb[kk][lid.x * 4u + i]);
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = RA(acc[i][j] + RA(av[i] * bv[j]));
                }
            }
        }
        workgroupBarrier();
    }
    let alpha = pf(27u);
    let beta = pf(28u);
    for (var i = 0u; i < 4u; i = i + 1u) {
        let r = row0 + lid.y * 4u + i;
        if (r >= m) { continue; }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let q = col0 + lid.x * 4u + j;
            if (q >= n) { continue; }
            var v = f32(acc[i][j]);
            if (alpha != 1.0) { v = alpha * v; }
            if (pu(26u) != 0u) { v = v + beta * f32(c[i32(r) * pi(29u) + i32(q) * pi(30u)]); }
            y[(wg.z * m + r) * n + q] = TF(v);
        }
    }
}
