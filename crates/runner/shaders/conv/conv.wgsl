// Direct 2-D convolution and transposed convolution (1-D runs as H = 1), NCHW, groups, dilations, strides, pads,
// one invocation per output element, accumulating in A.
// params: 0 n, 1 Cin, 2 H, 3 W, 4 Cout, 5 OH, 6 OW, 7 KH, 8 KW, 9 stride h, 10 stride w, 11 pad top, 12 pad left,
//         13 dilation h, 14 dilation w, 15 groups, 16 has bias

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> w: array<T>;
@group(0) @binding(3) var<storage, read> bias: array<T>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;

struct Out { n: u32, co: u32, oy: u32, ox: u32 }

fn out_at(i: u32) -> Out {
    let ow = pu(6u);
    let oh = pu(5u);
    let cout = pu(4u);
    return Out(i / (ow * oh * cout), (i / (ow * oh)) % cout, (i / ow) % oh, i % ow);
}

fn finish(i: u32, co: u32, acc: A) {
    var v = f32(acc);
    if (pu(16u) != 0u) {
        v = v + f32(bias[co]);
    }
    y[i] = TF(v);
}

@compute @workgroup_size(256)
fn conv(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let o = out_at(i);
    let cin = pu(1u);
    let h = i32(pu(2u));
    let wd = i32(pu(3u));
    let kh = pu(7u);
    let kw = pu(8u);
    let cg = cin / pu(15u);
    let og = pu(4u) / pu(15u);
    let g = o.co / og;
    var acc = A(0.0);
    for (var c = 0u; c < cg; c = c + 1u) {
        let ci = g * cg + c;
        let xb = (o.n * cin + ci) * u32(h) * u32(wd);
        let wb = (o.co * cg + c) * kh * kw;
        for (var ky = 0u; ky < kh; ky = ky + 1u) {
            let iy = i32(o.oy * pu(9u) + ky * pu(13u)) - pi(11u);
            if (iy < 0 || iy >= h) { continue; }
            for (var kx = 0u; kx < kw; kx = kx + 1u) {
                let ix = i32(o.ox * pu(10u) + kx * pu(14u)) - pi(12u);
                if (ix < 0 || ix >= wd) { continue; }
                acc = RA(acc + RA(A(x[xb + u32(iy * wd + ix)]) * A(w[wb + ky * kw + kx])));
            }
        }
    }
    finish(i, o.co, acc);
}

@compute @workgroup_size(256)
fn conv_transpose(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    let o = out_at(i);
    let cin = pu(1u);
    let h = i32(pu(2u));
    let wd = i32(pu(3u));
    let kh = pu(7u);
    let kw = pu(8u);
    let sh = i32(pu(9u));
    let sw = i32(pu(10u));
    let cg = cin / pu(15u);
    let og = pu(4u) / pu(15u);
    let g = o.co / og;
    let cl = o.co % og;
    var acc = A(0.0);
    for (var c = 0u; c < cg; c = c + 1u) {
        let ci = g * cg + c;
        let xb = (o.n * cin + ci) * u32(h) * u32(wd);
        let wb = (ci * og + cl) * kh * kw;
        for (var ky = 0u; ky < kh; ky = ky + 1u) {
            let ty = i32(o.oy) + pi(11u) - i32(ky * pu(13u));
            if (ty < 0 || ty % sh != 0) { continue; }
            let iy = ty / sh;
            if (iy >= h) { continue; }
            for (var kx = 0u; kx < kw; kx = kx + 1u) {
                let tx = i32(o.ox) + pi(12u) - i32(kx * pu(14u));
                if (tx < 0 || tx % sw != 0) { continue; }
                let ix = tx / sw;
                if (ix >= wd) { continue; }
                acc = RA(acc + RA(A(x[xb + u32(iy * wd + ix)]) * A(w[wb + ky * kw + kx])));
            }
        }
    }
    finish(i, o.co, acc);
}

// Convolution as an implicit matrix product per group (weights [og, Cg·KH·KW] × input patches
// [Cg·KH·KW, N·OH·OW], patches gathered on the fly): 64×64 output tiles, 16 deep, a 4×4 block of accumulators
// per invocation, like linalg/matmul.wgsl. Used when a group has at least 16 output channels (depthwise and
// narrow grouped convolutions use `conv`). params as `conv`, plus 17 batch N.
var<workgroup> tw: array<array<T, 64>, 16>;
var<workgroup> tx: array<array<T, 64>, 16>;

@compute @workgroup_size(16, 16)
fn conv_gemm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let cin = pu(1u);
    let h = i32(pu(2u));
    let wd = i32(pu(3u));
    let cout = pu(4u);
    let oh = pu(5u);
    let ow = pu(6u);
    let kh = pu(7u);
    let kw = pu(8u);
    let groups = pu(15u);
    let cg = cin / groups;
    let og = cout / groups;
    let g = wg.z;
    let kk_all = cg * kh * kw;
    let ncols = pu(17u) * oh * ow;
    let row0 = wg.y * 64u;
    let col0 = wg.x * 64u;
    let t = lid.y * 16u + lid.x;
    var acc: array<array<A, 4>, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) { acc[i][j] = A(0.0); }
    }
    for (var k0 = 0u; k0 < kk_all; k0 = k0 + 16u) {
        for (var l = 0u; l < 4u; l = l + 1u) {
            let e = t + l * 256u;
            let kk = e / 64u;
            let mm = e % 64u;
            let k = k0 + kk;
            var vw = T(0.0);
            if (row0 + mm < og && k < kk_all) { vw = w[(g * og + row0 + mm) * kk_all + k]; }
            tw[kk][mm] = vw;
            var vx = T(0.0);
            let col = col0 + mm;
            if (col < ncols && k < kk_all) {
                let c = k / (kh * kw);
                let ky = (k / kw) % kh;
                let kx = k % kw;
                let b = col / (oh * ow);
                let oy = (col / ow) % oh;
                let ox = col % ow;
                let iy = i32(oy * pu(9u) + ky * pu(13u)) - pi(11u);
                let ix = i32(ox * pu(10u) + kx * pu(14u)) - pi(12u);
                if (iy >= 0 && iy < h && ix >= 0 && ix < wd) {
                    vx = x[((b * cin + g * cg + c) * u32(h) + u32(iy)) * u32(wd) + u32(ix)];
                }
            }
            tx[kk][mm] = vx;
        }
        workgroupBarrier();
        let kn = min(16u, kk_all - k0);
        for (var kk = 0u; kk < kn; kk = kk + 1u) {
            var av: array<A, 4>;
            var bv: array<A, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                av[i] = A(tw[kk][lid.y * 4u + i]);
                bv[i] = A(tx[kk][lid.x * 4u + i]);
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = RA(acc[i][j] + RA(av[i] * bv[j]));
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        let m = row0 + lid.y * 4u + i;
        if (m >= og) { continue; }
        let co = g * og + m;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let col = col0 + lid.x * 4u + j;
            if (col >= ncols) { continue; }
            let b = col / (oh * ow);
            finish((b * cout + co) * oh * ow + col % (oh * ow), co, acc[i][j]);
        }
    }
}
