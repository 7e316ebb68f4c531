//! The chaos suite's seeded pseudo-random numbers: SplitMix64 (Steele, Lea, Flood 2014), small,
//! fast and good enough to pick operations and fault moments. Every random choice of a run
//! comes from one generator seeded with the run's seed, so a seed fixes every draw.

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0), without modulo bias (rejection sampling).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "between({lo}, {hi})");
        lo + self.below(hi - lo + 1)
    }

    /// An index into a list of `weights`, each drawn with probability weight / sum; `None` when
    /// every weight is 0.
    pub fn weighted(&mut self, weights: &[u64]) -> Option<usize> {
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut x = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return Some(i);
            }
            x -= w;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_other_seed_other_numbers() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(43);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn splitmix64_reference_values() {
        // First outputs of SplitMix64 seeded with 0 (the reference implementation's).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn below_and_between_stay_in_range_and_cover_it() {
        let mut r = Rng::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..5_000 {
            let x = r.below(5) as usize;
            seen[x] += 1;
            let y = r.between(10, 12);
            assert!((10..=12).contains(&y));
        }
        // Roughly uniform: each of 5 values about 1,000 times.
        assert!(seen.iter().all(|n| (800..1200).contains(n)), "{seen:?}");
    }

    #[test]
    fn weighted_never_picks_a_zero_weight() {
        let mut r = Rng::new(9);
        assert_eq!(r.weighted(&[0, 0]), None);
        for _ in 0..1_000 {
            let i = r.weighted(&[0, 3, 0, 1]).expect("a weight is positive");
            assert!(i == 1 || i == 3);
        }
    }
}
