// Unary element-wise ops, picked by an op code (params[1]) so one pipeline serves them all.
// params: 0 n, 1 op, 2 alpha (f32 bits), 3 beta (f32 bits). Relu and Clip keep NaN, as numpy and the spec's
// reference implementation do (WGSL leaves max/min/clamp of NaN to the implementation).

@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> y: array<T>;

// erf in f32, Abramowitz & Stegun 7.1.26 refined (|error| < 1.5e-7).
fn erf32(v: f32) -> f32 {
    let s = sign(v);
    let a = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return s * (1.0 - p * exp(-a * a));
}

fn tanh32(v: f32) -> f32 { return tanh(clamp(v, -15.0, 15.0)); }

fn sigmoid32(v: f32) -> f32 {
    if (v >= 0.0) { return 1.0 / (1.0 + exp(-v)); }
    let e = exp(v);
    return e / (1.0 + e);
}

fn un(v: T, op: u32, a: f32, b: f32) -> T {
    let f = f32(v);
    switch op {
        case 0u: { return v; }
        case 1u: { return -v; }
        case 2u: { return abs(v); }
        case 3u: { return select(max(v, T(0.0)), v, is_nan(f)); }
        case 4u: { return TF(sigmoid32(f)); }
        case 5u: { return TF(tanh32(f)); }
        case 6u: { return TF(exp(f)); }
        case 7u: { return TF(log(f)); }
        case 8u: { return TF(sqrt(f)); }
        case 9u: { return R(T(1.0) / v); }
        case 10u: { return select(R(v * T(a)), v, v >= T(0.0)); }
        case 11u: { return TF(erf32(f)); }
        case 12u: { return TF(0.5 * f * (1.0 + erf32(f * 0.70710678118654752))); }
        case 13u: { return TF(0.5 * f * (1.0 + tanh32(0.7978845608028654 * (f + 0.044715 * f * f * f)))); }
        case 14u: { return TF(clamp(a * f + b, 0.0, 1.0)); }
        case 15u: { return TF(f * clamp(f / 6.0 + 0.5, 0.0, 1.0)); }
        case 16u: { return select(clamp(v, T(a), T(b)), v, is_nan(f)); }
        case 17u: { return TF(max(f, 0.0) + log(1.0 + exp(-abs(f)))); }
        case 18u: { return T(r16(f)); }
        case 19u: { return T(rbf16(f)); }
        case 20u: { return select(TF(a * (exp(f) - 1.0)), v, f >= 0.0); }
        case 21u: { return floor(v); }
        case 22u: { return ceil(v); }
        case 23u: { return round(v); }
        case 24u: { return TF(sin(f)); }
        case 25u: { return TF(cos(f)); }
        case 26u: { return sign(v); }
        case 27u: { return TF(select(b * (a * exp(f) - a), b * f, f > 0.0)); }
        case 28u: { return TF(f * sigmoid32(f)); }
        case 29u: { return TF(f * sigmoid32(a * f)); }
        case 30u: { return TF(f * tanh32(max(f, 0.0) + log(1.0 + exp(-abs(f))))); }
        case 31u: { return select(T(0.0), v, f > a); }
        case 32u: { return TF(pow(f, a)); }
        case 33u: { return R(v * T(a)); }
        case 34u: { return TF(tan(f)); }
        // asin and acos through atan2: lavapipe's own are off by thousands of ulp, its atan2 is not.
        case 35u: { return TF(atan2(f, sqrt((1.0 - f) * (1.0 + f)))); }
        case 36u: { return TF(atan2(sqrt((1.0 - f) * (1.0 + f)), f)); }
        case 37u: { return TF(atan(f)); }
        case 38u: { return TF(sinh(f)); }
        case 39u: { return TF(cosh(f)); }
        case 40u: { return TF(asinh(f)); }
        case 41u: { return TF(acosh(f)); }
        case 42u: { return TF(atanh(f)); }
        case 43u: { return TF(f / (1.0 + abs(f))); }
        case 44u: { return TF(select(select(0.0, f - b, f > a), f + b, f < -a)); }
        case 45u: { return TF(select(0.0, 1.0, f > a)); }
        default: { return v; }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(id, nwg);
    if (i >= pu(0u)) { return; }
    y[i] = un(x[i], pu(1u), pf(2u), pf(3u));
}
