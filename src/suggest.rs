//! "Did you mean …?" for names a user types: probe ids, groups and subcommands.
//!
//! A typo in `--probe concurrent-duplicate` or `idem-check rnu` should cost one glance, not a
//! read through the whole list of names. Optimal string alignment counts a swap of two
//! neighbouring letters as one edit, so `rnu` is one edit from `run`, where clap's own
//! similarity measure finds nothing.

/// The candidate `typed` most likely misspells: the nearest by optimal string alignment, if it is
/// at most one edit in three letters away (at least one edit), the first in `candidates` order on
/// a tie. `None` when nothing is that close, so an unrelated word gets no suggestion.
pub fn closest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (typed.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (strsim::osa_distance(typed, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn a_swap_a_missing_letter_and_a_wrong_letter_are_each_one_edit() {
        let commands = ["run", "stress", "list", "init"];
        assert_eq!(closest("rnu", commands), Some("run"));
        assert_eq!(closest("stres", commands), Some("stress"));
        assert_eq!(closest("lisr", commands), Some("list"));
    }

    #[test]
    fn a_long_name_allows_more_edits_and_an_unrelated_word_gets_none() {
        let probes = ["concurrent-duplicates", "lost-response", "key-syntax"];
        assert_eq!(
            closest("concurrent-duplicate", probes),
            Some("concurrent-duplicates")
        );
        assert_eq!(
            closest("concurent-duplicats", probes),
            Some("concurrent-duplicates")
        );
        assert_eq!(closest("key-syntx", probes), Some("key-syntax"));
        assert_eq!(closest("payments", probes), None);
        assert_eq!(closest("xyz", probes), None);
    }

    #[test]
    fn a_tie_goes_to_the_first_candidate() {
        assert_eq!(closest("ab", ["ac", "ad"]), Some("ac"));
    }
}
