//! Robust trend statistics for short series (6–20 points): Theil–Sen slope and the
//! one-sided Mann–Kendall test. Memory series are full of ties once quantised, so the
//! variance is tie-corrected; without ties the p-value is exact (Kendall's S counted
//! from the Mahonian distribution), which matters most for the smallest windows.

use crate::fmt::MIB_U64;

/// Values at or below this many points get the exact null distribution when untied.
const EXACT_MAX_N: usize = 20;

/// Quantise bytes to whole MiB so allocator rounding jitter becomes ties, not trend.
pub fn quantise_mib(bytes: u64) -> i64 {
    i64::try_from(bytes.saturating_add(MIB_U64 / 2) / MIB_U64).unwrap_or(i64::MAX)
}

/// Median of a slice (NaN-free input); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let m = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[m]
    } else {
        (values[m - 1] + values[m]) / 2.0
    })
}

/// Theil–Sen slope: median of pairwise slopes (y_j − y_i)/(x_j − x_i) over pairs with
/// distinct x. A single spike moves only a minority of the pairs, unlike least squares.
pub fn theil_sen(xs: &[f64], ys: &[f64]) -> Option<f64> {
    let n = xs.len().min(ys.len());
    let mut slopes = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let dx = xs[j] - xs[i];
            if dx != 0.0 {
                slopes.push((ys[j] - ys[i]) / dx);
            }
        }
    }
    median(&mut slopes)
}

/// Result of a one-sided (upward) Mann–Kendall test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannKendall {
    pub n: usize,
    /// Kendall's S = Σ_{i<j} sign(y_j − y_i).
    pub s: i64,
    /// Tie-corrected variance of S under no trend.
    pub var_s: f64,
    /// P(S ≥ observed | no trend).
    pub p_up: f64,
    /// Whether `p_up` comes from the exact distribution rather than the normal approximation.
    pub exact: bool,
}

/// One-sided Mann–Kendall test for an upward trend on values in time order.
pub fn mann_kendall_up(ys: &[i64]) -> MannKendall {
    let n = ys.len();
    let mut s: i64 = 0;
    for i in 0..n {
        for j in i + 1..n {
            s += (ys[j] - ys[i]).signum();
        }
    }
    let tie_groups = tie_group_sizes(ys);
    let nf = n as f64;
    let ties: f64 = tie_groups
        .iter()
        .map(|&t| {
            let t = t as f64;
            t * (t - 1.0) * (2.0 * t + 5.0)
        })
        .sum();
    let var_s = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    if n < 2 {
        return MannKendall {
            n,
            s,
            var_s,
            p_up: 1.0,
            exact: true,
        };
    }
    if tie_groups.is_empty() && n <= EXACT_MAX_N {
        return MannKendall {
            n,
            s,
            var_s,
            p_up: exact_p_up(n, s),
            exact: true,
        };
    }
    let p_up = if var_s <= 0.0 {
        1.0
    } else {
        // Continuity correction: S moves in steps of 2.
        let z = if s > 0 {
            (s as f64 - 1.0) / var_s.sqrt()
        } else if s < 0 {
            (s as f64 + 1.0) / var_s.sqrt()
        } else {
            0.0
        };
        normal_sf(z)
    };
    MannKendall {
        n,
        s,
        var_s,
        p_up,
        exact: false,
    }
}

/// Sizes of groups of equal values (only groups of two or more).
fn tie_group_sizes(ys: &[i64]) -> Vec<usize> {
    let mut sorted = ys.to_vec();
    sorted.sort_unstable();
    let mut groups = Vec::new();
    let mut run = 1;
    for w in sorted.windows(2) {
        if w[0] == w[1] {
            run += 1;
        } else {
            if run > 1 {
                groups.push(run);
            }
            run = 1;
        }
    }
    if run > 1 && sorted.len() > 1 {
        groups.push(run);
    }
    groups
}

/// Exact P(S ≥ s) for n untied values: S = N − 2·inversions with N = n(n−1)/2, and the
/// number of permutations with k inversions is the Mahonian number M(n, k).
fn exact_p_up(n: usize, s: i64) -> f64 {
    let Some(cdf) = mahonian_cdfs().get(n) else {
        return 1.0;
    };
    let pairs = n * (n.saturating_sub(1)) / 2;
    // S ≥ s  ⇔  inversions ≤ (N − s)/2.
    let max_inv = (pairs as i64 - s).div_euclid(2);
    if max_inv < 0 {
        return 0.0;
    }
    let max_inv = usize::try_from(max_inv).unwrap_or(usize::MAX).min(pairs);
    cdf.get(max_inv).copied().unwrap_or(1.0)
}

/// For each n ≤ `EXACT_MAX_N`: P(inversions ≤ k) for k = 0..=n(n−1)/2, computed once.
fn mahonian_cdfs() -> &'static Vec<Vec<f64>> {
    static CDFS: std::sync::OnceLock<Vec<Vec<f64>>> = std::sync::OnceLock::new();
    CDFS.get_or_init(|| {
        let mut out = vec![vec![1.0], vec![1.0]];
        let mut counts = vec![1f64];
        for m in 2..=EXACT_MAX_N {
            // Inserting the m-th element adds 0..m-1 inversions.
            let pairs = m * (m - 1) / 2;
            let mut next = vec![0f64; pairs + 1];
            for (k, &c) in counts.iter().enumerate() {
                for add in 0..m {
                    next[k + add] += c;
                }
            }
            counts = next;
            let total: f64 = counts.iter().sum();
            let mut acc = 0.0;
            out.push(
                counts
                    .iter()
                    .map(|c| {
                        acc += c;
                        acc / total
                    })
                    .collect(),
            );
        }
        out
    })
}

/// Upper tail of the standard normal, P(Z ≥ z).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, relative error
/// below 1.2e-7 everywhere): ample for comparing p-values with 0.01.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * libm::exp(poly);
    if x >= 0.0 { r } else { 2.0 - r }
}

/// Robust noise scale around a Theil–Sen line: 1.4826·MAD of the residuals (the
/// normal-consistent σ). A trend does not inflate it, a single spike barely moves it, and
/// a zigzag shows up as noise (first differences would call a zigzag noiseless).
pub fn residual_noise(xs: &[f64], ys: &[f64], slope: f64) -> f64 {
    let mut r: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| y - slope * x).collect();
    let Some(med) = median(&mut r) else {
        return 0.0;
    };
    let mut dev: Vec<f64> = r.iter().map(|v| (v - med).abs()).collect();
    median(&mut dev).map_or(0.0, |mad| 1.4826 * mad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    /// gpumon computes exp, log, log10, log2, expm1 and pow with the `libm` crate, not the
    /// system libm (Cargo.toml says why); on what it keeps of them the values are the
    /// system's: the decade of log10 (the chart's scale step, the alerts' 4 significant
    /// digits), 10 to a whole power (parsed, not pow) bit for bit; exp (the p-values, whose
    /// erfc is good to 1.2e-7, and the working set's fit), log2 (the report's log axis,
    /// drawn to 0.1 px), log, expm1 and pow (the working set's geometric fit and forecast)
    /// within one unit in the last place. log10 itself can differ in the last place
    /// (1.4999999999999996e-4).
    #[test]
    fn libm_crate_gives_the_system_libms_values() {
        let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).abs();
        for k in -12..=18 {
            let x: f64 = format!("1e{k}").parse().expect("a number");
            for v in [x, x.next_up(), x.next_down(), x * 1.5, x * 2.5, x * 7.3] {
                assert_eq!(libm::log10(v).floor(), v.log10().floor(), "log10 {v:e}");
                assert!(ulps(libm::log2(v), v.log2()) <= 1, "log2 {v:e}");
            }
        }
        for e in -12..=18 {
            let e = f64::from(e);
            // The chart's step parses `1e{e}` (the nearest double, as the system's pow
            // gives; the libm crate's pow(10, -11) is one unit above it).
            let parsed: f64 = format!("1e{e}").parse().expect("a number");
            assert_eq!(parsed.to_bits(), 10f64.powf(e).to_bits(), "10^{e}");
        }
        for i in 0..=20_000 {
            // erfc's exponent: -z^2 - 1.27 + ... for z in 0..=20.
            let z = f64::from(i) / 1000.0;
            let arg = -z * z - 1.265_512_23 + f64::from(i % 7) * 0.1;
            assert!(ulps(libm::exp(arg), arg.exp()) <= 1, "exp {arg:e}");
        }
        // The working set's fit: log of 1 MiB to 1 TiB, a growth of -50 % to +100 % an
        // epoch, raised to up to 10,000 epochs ahead (workset.rs).
        for i in 0..=4_000 {
            let y = 2f64.powi(20) * 1.0053f64.powi(i) + f64::from(i % 13);
            assert!(ulps(libm::log(y), y.ln()) <= 1, "log {y:e}");
            let g = (f64::from(i) - 2_000.0) / 2_900.0;
            assert!(ulps(libm::expm1(g), g.exp_m1()) <= 1, "expm1 {g:e}");
            let k = f64::from(i) * 2.5;
            let base = 1.0 + (f64::from(i % 151) - 50.0) / 100.0;
            assert!(
                ulps(libm::pow(base, k), base.powf(k)) <= 1,
                "pow {base:e} {k:e}"
            );
        }
    }

    #[test]
    fn strictly_increasing_six_has_exact_p_one_in_720() {
        let mk = mann_kendall_up(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(mk.s, 15);
        assert!(mk.exact);
        assert!(close(mk.p_up, 1.0 / 720.0, 1e-12), "{}", mk.p_up);
    }

    #[test]
    fn exact_tail_matches_mahonian_counts() {
        // n = 6: one inversion in 5 of 720 permutations, two in 14.
        let one_swap = mann_kendall_up(&[1, 2, 3, 5, 4, 6]);
        assert_eq!(one_swap.s, 13);
        assert!(close(one_swap.p_up, 6.0 / 720.0, 1e-12));
        let mk = mann_kendall_up(&[2, 1, 3, 5, 4, 6]);
        assert_eq!(mk.s, 11);
        assert!(close(mk.p_up, 20.0 / 720.0, 1e-12));
        // Decreasing: every permutation has S ≥ −15.
        assert!(close(mann_kendall_up(&[6, 5, 4, 3, 2, 1]).p_up, 1.0, 1e-12));
    }

    #[test]
    fn exact_is_symmetric_around_zero() {
        let p_pos = exact_p_up(4, 2);
        let p_zero = exact_p_up(4, 0);
        // Mahonian n=4: 1 3 5 6 5 3 1 → P(S ≥ 0) = (1+3+5+6)/24, P(S ≥ 2) = 9/24.
        assert!(close(p_zero, 15.0 / 24.0, 1e-12));
        assert!(close(p_pos, 9.0 / 24.0, 1e-12));
    }

    #[test]
    fn ties_reduce_variance_and_use_normal_approximation() {
        let ys = [10, 10, 10, 11, 11, 11];
        let mk = mann_kendall_up(&ys);
        assert_eq!(mk.s, 9);
        // (6·5·17 − 2·3·2·11)/18 = 21
        assert!(close(mk.var_s, 21.0, 1e-12));
        assert!(!mk.exact);
        // z = 8/√21 = 1.7457 → p ≈ 0.0404
        assert!(close(mk.p_up, 0.0404, 0.01), "{}", mk.p_up);
    }

    #[test]
    fn all_equal_is_never_a_trend() {
        let mk = mann_kendall_up(&[7; 10]);
        assert_eq!(mk.s, 0);
        assert_eq!(mk.var_s, 0.0);
        assert_eq!(mk.p_up, 1.0);
    }

    #[test]
    fn normal_tail_known_values() {
        assert!(close(normal_sf(0.0), 0.5, 1e-6));
        assert!(close(normal_sf(1.959_964), 0.025, 1e-5));
        assert!(close(normal_sf(2.326_348), 0.01, 1e-5));
        assert!(close(normal_sf(-1.644_854), 0.95, 1e-6));
    }

    #[test]
    fn theil_sen_ignores_a_spike() {
        let xs: Vec<f64> = (0..7).map(f64::from).collect();
        let ys = [0.0, 2.0, 4.0, 600.0, 8.0, 10.0, 12.0];
        assert_eq!(theil_sen(&xs, &ys), Some(2.0));
        assert_eq!(theil_sen(&[1.0], &[1.0]), None);
    }

    #[test]
    fn theil_sen_uses_x_spacing() {
        // Epoch numbers with a gap: slope is per epoch, not per point.
        let xs = [1.0, 2.0, 4.0, 5.0];
        let ys = [10.0, 20.0, 40.0, 50.0];
        assert_eq!(theil_sen(&xs, &ys), Some(10.0));
    }

    #[test]
    fn quantise_rounds_to_nearest_mib() {
        assert_eq!(quantise_mib(0), 0);
        assert_eq!(quantise_mib(MIB_U64 / 2 - 1), 0);
        assert_eq!(quantise_mib(MIB_U64 / 2), 1);
        assert_eq!(quantise_mib(3 * MIB_U64 + 100), 3);
        assert!(quantise_mib(u64::MAX) > 0);
    }

    #[test]
    fn residual_noise_ignores_trend_and_sees_zigzag() {
        let xs: Vec<f64> = (0..10).map(f64::from).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 5.0 * x).collect();
        assert_eq!(residual_noise(&xs, &ys, 5.0), 0.0);
        let zig: Vec<f64> = (0..6).map(|i| if i % 2 == 0 { 0.0 } else { 4.0 }).collect();
        let b = theil_sen(&xs[..6], &zig).expect("slope");
        assert!(residual_noise(&xs[..6], &zig, b) > 2.0);
        let mut spike = ys.clone();
        spike[4] += 1e6;
        assert_eq!(
            residual_noise(&xs, &spike, 5.0),
            0.0,
            "one spike is not noise"
        );
        assert_eq!(residual_noise(&[], &[], 1.0), 0.0);
    }
}
