//! The operator's own histograms (Prometheus text), read before and after a phase: a diagnosis
//! of where the time goes (never a figure that is checked; those are counted outside).

use std::collections::BTreeMap;

/// Cumulative bucket counts of the histogram `name` (summed over label sets other than `le`),
/// by upper bound in seconds (`+Inf` as infinity).
pub fn buckets(metrics: &str, name: &str) -> BTreeMap<u64, (f64, f64)> {
    // Keyed by the bound's bits so that the map orders them (bounds are positive).
    let prefix = format!("{name}_bucket{{");
    let mut out: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(le) = labels.split(',').find_map(|l| {
            l.trim()
                .strip_prefix("le=\"")
                .and_then(|v| v.strip_suffix('"'))
        }) else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse::<f64>() {
                Ok(b) => b,
                Err(_) => continue,
            }
        };
        let Ok(count) = value.trim().parse::<f64>() else {
            continue;
        };
        out.entry(bound.to_bits()).or_insert((bound, 0.0)).1 += count;
    }
    out
}

/// The smallest bucket bound below which at least `q` (0..1) of the observations made between
/// `before` and `after` fall; `None` without observations. (An upper bound of the quantile.)
pub fn quantile_bound(before: &str, after: &str, name: &str, q: f64) -> Option<f64> {
    let (old, new) = (buckets(before, name), buckets(after, name));
    let counts: Vec<(f64, f64)> = new
        .values()
        .map(|(bound, n)| {
            let earlier = old
                .get(&bound.to_bits())
                .map(|(_, n)| *n)
                .unwrap_or_default();
            (*bound, n - earlier)
        })
        .collect();
    let total = counts.last()?.1;
    if total <= 0.0 {
        return None;
    }
    counts
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(bound, _)| *bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
x_seconds_bucket{kind=\"Cache\",le=\"0.1\"} 10
x_seconds_bucket{kind=\"Cache\",le=\"1\"} 10
x_seconds_bucket{kind=\"Cache\",le=\"+Inf\"} 10
";
    const AFTER: &str = "\
# HELP x_seconds x
x_seconds_bucket{kind=\"Cache\",le=\"0.1\"} 60
x_seconds_bucket{kind=\"Cache\",le=\"1\"} 108
x_seconds_bucket{kind=\"Cache\",le=\"+Inf\"} 110
x_seconds_bucket{kind=\"Template\",le=\"0.1\"} 0
x_seconds_bucket{kind=\"Template\",le=\"1\"} 0
x_seconds_bucket{kind=\"Template\",le=\"+Inf\"} 0
x_seconds_sum{kind=\"Cache\"} 12
";

    #[test]
    fn quantile_bounds_of_the_observations_in_between() {
        // 100 new observations: 50 under 0.1 s, 98 under 1 s, 2 above.
        assert_eq!(quantile_bound(BEFORE, AFTER, "x_seconds", 0.5), Some(0.1));
        assert_eq!(quantile_bound(BEFORE, AFTER, "x_seconds", 0.9), Some(1.0));
        assert_eq!(
            quantile_bound(BEFORE, AFTER, "x_seconds", 0.99),
            Some(f64::INFINITY)
        );
        assert_eq!(quantile_bound(AFTER, AFTER, "x_seconds", 0.5), None);
        assert_eq!(quantile_bound("", "", "y", 0.5), None);
        assert_eq!(buckets(AFTER, "x_seconds").len(), 3);
    }
}
