//! A small deterministic PRNG (SplitMix64). The generator draws every
//! choice from one of these, seeded from the case's u64 seed and nothing
//! else (no wall clock, no thread id), so a seed names a sequence.

pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            // Adjacent seeds (base + i) give unrelated streams anyway:
            // SplitMix64's output function mixes every bit.
            state: seed ^ 0x243F_6A88_85A3_08D3,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below(0)");
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// One of the values, with the given relative weights.
    pub fn weighted<T: Copy>(&mut self, xs: &[(u32, T)]) -> T {
        let total: u32 = xs.iter().map(|(w, _)| w).sum();
        let mut r = self.below(total as usize) as u32;
        for (w, v) in xs {
            if r < *w {
                return *v;
            }
            r -= w;
        }
        unreachable!("weights add up")
    }

    /// A fraction in parts per million (for cut points that are placed on
    /// the encoded length at run time).
    pub fn ppm(&mut self) -> u32 {
        self.below(1_000_000) as u32
    }
}
