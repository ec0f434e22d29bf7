//! The keys the API accepts, learnt once by the pre-flight and kept by every key a probe
//! derives. An API whose key column is a UUID refuses `K-<uuid>`; judging it on a key it can
//! never accept would blame it for a shape, not for what the probe tests. So the pre-flight
//! sends a few trial keys (each a refusal teaches one thing), and a probe that cannot build a
//! key of the learnt shape SKIPs naming it
//! ([`super::relation`]).

use crate::carrier::{Alphabet, KeyShape, GENERATED_KEY_LEN};

/// How many trial keys the pre-flight sends at most.
pub const MAX_TRIALS: usize = 3;

/// One trial key and the shape a refusal of it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trial {
    pub key: String,
    /// What the trial tries, for its role: `a key that is not a UUID`.
    pub what: &'static str,
    /// The shape the API accepts if it refuses this key but took every earlier one.
    pub refused_means: KeyShape,
}

/// The trials, in order: a prefixed UUID (refused → UUIDs only), a key with characters outside
/// `[A-Za-z0-9_-]` (refused → that alphabet), a long key (refused → no longer than the
/// longest accepted). Each is built from `uuid` so it is new.
pub fn trials(uuid: &str) -> [Trial; MAX_TRIALS] {
    let prefixed = format!("K-{uuid}");
    let long = format!("k-{uuid}-{}", "k".repeat(100));
    [
        Trial {
            key: prefixed.clone(),
            what: "a key that is not a UUID",
            refused_means: KeyShape {
                alphabet: Alphabet::Uuid,
                max_len: None,
                lower_case_only: false,
            },
        },
        Trial {
            key: format!("k.{uuid}:~"),
            what: "a key with characters outside [A-Za-z0-9_-]",
            refused_means: KeyShape {
                alphabet: Alphabet::Token,
                max_len: None,
                lower_case_only: false,
            },
        },
        Trial {
            key: long,
            what: "a long key",
            refused_means: KeyShape {
                alphabet: Alphabet::Any,
                max_len: Some(prefixed.len().max(GENERATED_KEY_LEN)),
                lower_case_only: false,
            },
        },
    ]
}

/// What an answer to a trial says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    /// 400 or 422: the key was refused.
    Refused,
    /// Anything else (a 5xx, a 409, no answer): it says nothing about the key.
    Unclear,
}

impl Answer {
    pub fn of(status: Option<u16>) -> Answer {
        match status {
            Some(s) if (200..300).contains(&s) => Answer::Accepted,
            Some(400 | 422) => Answer::Refused,
            _ => Answer::Unclear,
        }
    }
}

/// The shape learnt so far, `shape`, after `trial` got `answer`; `None` once the trials should
/// stop (a refusal of a prefixed UUID settles it, and an unclear answer teaches nothing more).
pub fn learn(shape: KeyShape, trial: &Trial, answer: Answer) -> (KeyShape, bool) {
    match answer {
        Answer::Accepted => (shape, true),
        Answer::Unclear => (shape, false),
        Answer::Refused => {
            let learnt = KeyShape {
                alphabet: match trial.refused_means.alphabet {
                    Alphabet::Any => shape.alphabet,
                    other => other,
                },
                max_len: trial.refused_means.max_len.or(shape.max_len),
                lower_case_only: shape.lower_case_only,
            };
            (learnt, learnt.alphabet != Alphabet::Uuid)
        }
    }
}

/// The trial after a shape was learnt or given: `uuid` (a new key) upper-cased. A refusal shows
/// an API that takes its keys in lower case only, so no probe sends it an upper-cased key and
/// blames it for the refusal. Only then is it sent: a shape that allows any key is never
/// checked by pattern, and the trials' count stays what it was for it.
pub fn case_trial(uuid: &str) -> Trial {
    Trial {
        key: uuid.to_ascii_uppercase(),
        what: "an upper-cased key",
        refused_means: KeyShape::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0b9a2a8e-1111-4222-8333-444455556666";

    fn run(refuses: impl Fn(&str) -> bool) -> (KeyShape, usize) {
        let mut shape = KeyShape::default();
        let mut sent = 0;
        for t in trials(U) {
            sent += 1;
            let answer = if refuses(&t.key) {
                Answer::Refused
            } else {
                Answer::Accepted
            };
            let (learnt, go_on) = learn(shape, &t, answer);
            shape = learnt;
            if !go_on {
                break;
            }
        }
        (shape, sent)
    }

    #[test]
    fn refusals_teach_the_shape() {
        let uuid_only = run(|k| uuid::Uuid::try_parse(k).is_err());
        assert_eq!(uuid_only, ("uuid".parse().unwrap(), 1));
        let token = run(|k| {
            !k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
        });
        assert_eq!(token.0, "token".parse().unwrap());
        let short = run(|k| k.len() > 64);
        assert_eq!(short.0.max_len, Some(38));
        assert_eq!(run(|_| false), (KeyShape::default(), 3));
        let (unclear, go_on) = learn(KeyShape::default(), &trials(U)[0], Answer::of(Some(503)));
        assert!(!go_on && unclear == KeyShape::default());
    }
}
