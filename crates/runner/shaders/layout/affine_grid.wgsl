// AffineGrid: the sampling grid of an affine transform theta (N, r, r + 1) over r = 2 or 3 spatial axes; one
// invocation per output element (n, [d,] h, w, c) gives row c of theta applied to the point's base coordinates
// (x, y[, z], 1), each in [-1, 1]: at pixel centres, or at the corners with align_corners.
// params: 0 n, 1 r, 2 align_corners, 4..7 spatial sizes (D, H, W; 1-padded in front for r = 2)

@group(0) @binding(1) var<storage, read> theta: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

// The base coordinate of index i along an axis of `len` points.
fn base(i: u32, len: u32) -> f32 {
    if (pu(2u) != 0u) {
        if (len <= 1u) { return -1.0; }
        return -1.0 + f32(i) * 2.0 / f32(len - 1u);
    }
    return -1.0 + (2.0 * f32(i) + 1.0) / f32(len);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let r = pu(1u);
    let c = i % r;
    let p = i / r;
    let w = p % pu(6u);
    let h = (p / pu(6u)) % pu(5u);
    let d = (p / (pu(6u) * pu(5u))) % pu(4u);
    let n = p / (pu(6u) * pu(5u) * pu(4u));
    var pt = array<f32, 3>(base(w, pu(6u)), base(h, pu(5u)), base(d, pu(4u)));
    let row = (n * r + c) * (r + 1u);
    var acc = f32(theta[row + r]);
    for (var j = 0u; j < r; j = j + 1u) {
        acc = acc + f32(theta[row + j]) * pt[j];
    }
    y[i] = TF(acc);
}
