//! How phantom writes numbers and sizes, and reads sizes back: one place for every format and report.

/// Error figures with the four significant digits that carry meaning: `1173`, `9.847`, `0.001235`, `3.142e-7`.
pub fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if x.is_nan() {
        "nan".into()
    } else if (1e-3..1e4).contains(&x.abs()) {
        let decimals = (3 - x.abs().log10().floor() as i32).max(0) as usize;
        let s = format!("{x:.decimals$}");
        match s.contains('.') {
            true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
            false => s,
        }
    } else {
        format!("{x:.3e}")
    }
}

/// Parses `2GiB`, `512MiB`, `1.5G`, `800M`, `4096` (bytes).
pub fn parse_size(s: &str) -> Option<usize> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (n > 0.0 && (n * mult).is_finite() && n * mult < usize::MAX as f64)
        .then_some((n * mult) as usize)
}

/// `2.0 GiB`, `512 MiB`, `64 KiB`.
pub fn fmt_size(b: usize) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.0} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}
