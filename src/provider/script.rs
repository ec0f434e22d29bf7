//! What the fake does to a probe's calls, one step per call in arrival order: a probe arms a
//! script under its token, so only calls that hold that token are touched and every other
//! probe's calls are answered normally.

use std::collections::HashMap;
use std::time::Duration;

/// What the fake does to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Plays the profile: charge, replay, refuse as the key says.
    Normal,
    /// 503 without committing anything.
    Unavailable,
    /// 429 with `Retry-After: N` seconds, without committing anything.
    Throttled(u64),
    /// Closes the connection before any byte of an answer, without committing anything.
    Reset,
    /// Answers nothing for this long (or until the probe releases its token), then closes the
    /// connection, without committing: an answer the caller's deadline gives up on.
    HoldPast(Duration),
    /// Holds the call (its key in flight) until the probe releases the token or the bound
    /// passes, then plays the profile.
    HoldUntilReleased,
    /// Commits the charge, then closes the connection without answering.
    CommitThenClose,
    /// Answers the profile's in-progress conflict, as if another call with this key were
    /// still being worked on.
    InProgress,
    /// Plays the profile, then forgets the key (a provider whose retention ran out).
    NormalThenForget,
}

impl Step {
    /// How the evidence names what was done.
    pub fn label(self) -> Option<String> {
        match self {
            Step::Normal => None,
            Step::Unavailable => Some("answered 503 on purpose".into()),
            Step::Throttled(s) => Some(format!("answered 429 with Retry-After: {s} on purpose")),
            Step::Reset => Some("connection reset before any byte, on purpose".into()),
            Step::HoldPast(d) => Some(format!(
                "held {} ms without an answer, then closed",
                d.as_millis()
            )),
            Step::HoldUntilReleased => Some("held until released".into()),
            Step::CommitThenClose => Some("charge committed, then closed without an answer".into()),
            Step::InProgress => Some("answered the in-progress conflict on purpose".into()),
            Step::NormalThenForget => Some("key forgotten after the answer".into()),
        }
    }

    /// Whether the step ends without playing the profile (nothing is committed by the call
    /// except by [`Step::CommitThenClose`]).
    pub fn withholds(self) -> bool {
        !matches!(
            self,
            Step::Normal | Step::HoldUntilReleased | Step::NormalThenForget
        )
    }
}

/// One token's script: the steps for its calls in order, then `then` for every later call.
#[derive(Debug, Clone)]
pub struct Script {
    pub steps: Vec<Step>,
    pub then: Step,
}

impl Script {
    /// Every call answered normally.
    pub fn normal() -> Script {
        Script {
            steps: Vec::new(),
            then: Step::Normal,
        }
    }

    /// `steps` for the first calls, normal afterwards.
    pub fn first(steps: &[Step]) -> Script {
        Script {
            steps: steps.to_vec(),
            then: Step::Normal,
        }
    }

    /// `step` for every call.
    pub fn always(step: Step) -> Script {
        Script {
            steps: Vec::new(),
            then: step,
        }
    }
}

/// The armed scripts, and how many calls of each token they have seen.
#[derive(Debug, Default)]
pub struct Scripts {
    armed: HashMap<String, (Script, usize)>,
}

impl Scripts {
    pub fn arm(&mut self, token: &str, script: Script) {
        self.armed.insert(token.to_string(), (script, 0));
    }

    pub fn disarm(&mut self, token: &str) {
        self.armed.remove(token);
    }

    /// The step for the next call holding `token`.
    pub fn next(&mut self, token: Option<&str>) -> Step {
        let Some((script, seen)) = token.and_then(|t| self.armed.get_mut(t)) else {
            return Step::Normal;
        };
        let step = script.steps.get(*seen).copied().unwrap_or(script.then);
        *seen += 1;
        step
    }

    /// Whether `token` is armed.
    pub fn is_armed(&self, token: &str) -> bool {
        self.armed.contains_key(token)
    }

    /// The tokens armed now, for attribution.
    pub fn tokens(&self) -> impl Iterator<Item = &String> {
        self.armed.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_touches_only_its_token_and_then_plays_normally() {
        let mut s = Scripts::default();
        s.arm("t1", Script::first(&[Step::Unavailable, Step::Reset]));
        assert_eq!(s.next(Some("t2")), Step::Normal);
        assert_eq!(s.next(None), Step::Normal);
        assert_eq!(s.next(Some("t1")), Step::Unavailable);
        assert_eq!(s.next(Some("t1")), Step::Reset);
        assert_eq!(s.next(Some("t1")), Step::Normal);
        s.arm("t3", Script::always(Step::InProgress));
        assert_eq!(s.next(Some("t3")), Step::InProgress);
        assert_eq!(s.next(Some("t3")), Step::InProgress);
    }
}
