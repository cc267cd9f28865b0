//! Byte formatting shared by the UI, logs and alert messages (binary units, as nvidia-smi).

const KIB: f64 = 1024.0;
const MIB: f64 = KIB * 1024.0;
const GIB: f64 = MIB * 1024.0;

pub const MIB_U64: u64 = 1 << 20;
pub const GIB_U64: u64 = 1 << 30;

/// `512 B`, `3.0 KiB`, `18 MiB`, `61.2 GiB`: three significant digits at most.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= GIB {
        fmt3(b / GIB, "GiB")
    } else if b >= MIB {
        fmt3(b / MIB, "MiB")
    } else if b >= KIB {
        fmt3(b / KIB, "KiB")
    } else {
        format!("{bytes} B")
    }
}

/// Signed variant for growth rates (`+96 MiB`, `-1.5 GiB`).
pub fn human_signed(bytes: f64) -> String {
    let sign = if bytes < 0.0 { "-" } else { "+" };
    format!("{sign}{}", human(bytes.abs() as u64))
}

/// Compact GiB with one decimal, for tight columns (`61.2`).
pub fn gib1(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / GIB)
}

fn fmt3(v: f64, unit: &str) -> String {
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_each_magnitude() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 * 1024), "3.00 KiB");
        assert_eq!(human(18 * MIB_U64), "18.0 MiB");
        assert_eq!(human(615 * MIB_U64), "615 MiB");
        assert_eq!(human(143_771 * MIB_U64), "140 GiB");
        assert_eq!(human_signed(-1.5 * GIB), "-1.50 GiB");
        assert_eq!(gib1(61 * GIB_U64 + GIB_U64 / 5), "61.2");
    }
}
