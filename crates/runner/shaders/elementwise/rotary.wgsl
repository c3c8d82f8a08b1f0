// ONNX RotaryEmbedding (opset 23), one invocation per element of X: 4-D (B, N, S, H) or 3-D (B, S, N·H). The first
// `rot` values of each head rotate in pairs — (k, k + rot/2), or (2k, 2k + 1) when interleaved — by the angle of
// the token's position: cache row position_ids[b, s], or row (b, s) of a (B, S, rot/2) cache without them.
// params: 0 n, 1 S, 2 N, 3 H, 4 rot, 5 cache width, 6 interleaved, 7 has position_ids, 8 4-D

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> cs: array<T>;
@group(0) @binding(3) var<storage, read> sn: array<T>;
@group(0) @binding(4) var<storage, read> pid: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let s_len = pu(1u);
    let heads = pu(2u);
    let h = pu(3u);
    let rot = pu(4u);
    let d = i % h;
    if (d >= rot) { y[i] = x[i]; return; }
    var b = 0u;
    var s = 0u;
    if (pu(8u) != 0u) {
        s = (i / h) % s_len;
        b = i / (h * s_len * heads);
    } else {
        s = (i / (h * heads)) % s_len;
        b = i / (h * heads * s_len);
    }
    var row = b * s_len + s;
    if (pu(7u) != 0u) { row = u32(pid[b * s_len + s]); }
    let half = rot / 2u;
    var k = 0u;
    var partner = 0u;
    var first = true;
    if (pu(6u) != 0u) {
        k = d / 2u;
        first = d % 2u == 0u;
        partner = select(i - 1u, i + 1u, first);
    } else {
        first = d < half;
        k = select(d - half, d, first);
        partner = select(i - half, i + half, first);
    }
    let c = f32(cs[row * pu(5u) + k]);
    let sv = f32(sn[row * pu(5u) + k]);
    let a = f32(x[i]);
    let o = f32(x[partner]);
    y[i] = TF(select(a * c + o * sv, a * c - o * sv, first));
}
