//! Scaling raw per-node scores to kube-scheduler's 0..=100 range.

/// The highest node score.
pub const MAX_NODE_SCORE: i64 = 100;

/// kube-scheduler's default score normalization, in place: each score becomes
/// `100 * score / max` (integer division), or `100 - that` with `reverse` (for counts
/// where fewer is better). When every score is 0 (or `scores` is empty) they stay 0,
/// or all become 100 with `reverse`. Scores are expected to be non-negative.
pub fn normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for score in scores.iter_mut() {
        let scaled = if max > 0 {
            // Widen: a raw score times 100 may not fit in i64.
            let wide = i128::from(MAX_NODE_SCORE) * i128::from(*score) / i128::from(max);
            i64::try_from(wide).unwrap_or(MAX_NODE_SCORE)
        } else {
            0
        };
        *score = if reverse {
            MAX_NODE_SCORE - scaled
        } else {
            scaled
        };
    }
}
