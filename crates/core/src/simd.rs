//! The vector instructions the per-element passes over every value (the comparison, the expected noise) are
//! compiled for, chosen once at run time. phantom is built for baseline x86-64 (SSE2, two f64 per instruction);
//! these loops run 2–3× faster with AVX2 or AVX-512 where the CPU has them. Rust never fuses a multiply and an add
//! unless told to, so every level computes bit-identical results: only the speed differs.
//!
//! `PHANTOM_SIMD=base` (or `avx2`) caps the level: for benchmarks, and to rule the dispatch out when in doubt.

use std::sync::OnceLock;

/// The widest instruction set the hot passes use on this CPU.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Level {
    /// The build's baseline (SSE2 on x86-64; whatever the target is elsewhere).
    Base,
    /// AVX2 and FMA: four f64 per instruction.
    Avx2,
    /// AVX-512 F/DQ/VL/BW: eight f64 per instruction.
    Avx512,
}

/// The level in use: what the CPU has, capped by `PHANTOM_SIMD`.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = match std::env::var("PHANTOM_SIMD").as_deref() {
            Ok("base") => Level::Base,
            Ok("avx2") => Level::Avx2,
            _ => Level::Avx512,
        };
        detect().min(cap)
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if has!("avx512f") && has!("avx512dq") && has!("avx512vl") && has!("avx512bw") {
        Level::Avx512
    } else if has!("avx2") && has!("fma") {
        Level::Avx2
    } else {
        Level::Base
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Base
}

/// Whether every element is finite (an integer OR over the exponent fields, which the compiler vectorizes).
#[inline(always)]
pub fn all_finite(x: &[f64]) -> bool {
    const EXP: u64 = 0x7ff << 52;
    x.iter()
        .fold(0u64, |acc, v| acc | (v.to_bits() & EXP == EXP) as u64)
        == 0
}

/// Defines `$name`, which runs `$body` (an `#[inline(always)]` function of the same signature, generic over one
/// element type) compiled for the widest [`level`] this CPU has.
#[macro_export]
macro_rules! widened {
    ($(#[$m:meta])* $vis:vis fn $name:ident<$T:ident: $B:path>($($a:ident: $t:ty),* $(,)?) -> $r:ty = $body:ident) => {
        $(#[$m])*
        $vis fn $name<$T: $B>($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
                fn avx512<$T: $B>($($a: $t),*) -> $r {
                    $body($($a),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2<$T: $B>($($a: $t),*) -> $r {
                    $body($($a),*)
                }
                match $crate::simd::level() {
                    // SAFETY: `level` checked that this CPU has these instructions.
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($a),*) },
                    // SAFETY: as above.
                    $crate::simd::Level::Avx2 => return unsafe { avx2($($a),*) },
                    $crate::simd::Level::Base => {}
                }
            }
            $body($($a),*)
        }
    };
}
