//! What an exchange was for, as data: the probe's name for the request, its place in a burst or
//! a wave, and what the kit did to it (held it, sent it again on a new connection, met a rate
//! limiter). Renderers fold, chart and label exchanges by these fields; the one-line text every
//! report shows (`duplicate 2, wave 1/3 (throttled)`) is only how a role is displayed, and the
//! JSON report keeps that text, as it always has.

use std::fmt;

use serde::{Serialize, Serializer};

/// How a role marks a call that reached the fake provider, as displayed (and read back from a
/// report).
pub const AT_PROVIDER: &str = " (at the provider)";

/// An exchange's role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Role {
    /// What the probe calls the request, without its position: `original`, `burst 3/10`,
    /// `count before`.
    pub label: String,
    /// Its place in a series the kit sent.
    pub position: Option<Position>,
    /// Held in flight on the server on purpose.
    pub held: bool,
    /// It read the effect counter.
    pub reads_counter: bool,
    /// Sent a second time, and why: still one request, one exchange.
    pub resent: Option<Resend>,
    /// Answered 429 by a rate limiter and sent again.
    pub throttled: bool,
    /// A call the API under test made to the fake provider, as the provider saw it: not a
    /// request idem-check sent.
    pub at_provider: bool,
}

/// Why a request went out a second time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// Its kept-alive connection was closed by the server while idle, before any byte of an
    /// answer.
    NewConnection,
    /// The API answered 401 and `--auth-cmd` printed a new credential.
    NewCredential,
}

/// Where in a series a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// The `i`-th of `n` released together (`burst 3/10 7/16`).
    Of { i: usize, n: usize },
    /// The `i`-th duplicate, sent in wave `wave` of `waves` while an original was held.
    Wave { i: usize, wave: usize, waves: usize },
}

impl Role {
    pub fn new(label: impl Into<String>) -> Role {
        Role {
            label: label.into(),
            ..Role::default()
        }
    }

    /// The `i`-th (from 1) of `n` requests released together.
    pub fn nth(label: impl Into<String>, i: usize, n: usize) -> Role {
        Role {
            position: Some(Position::Of { i, n }),
            ..Role::new(label)
        }
    }

    /// The `i`-th duplicate, in wave `wave` of `waves`.
    pub fn in_wave(label: impl Into<String>, i: usize, wave: usize, waves: usize) -> Role {
        Role {
            position: Some(Position::Wave { i, wave, waves }),
            ..Role::new(label)
        }
    }

    /// This role, held in flight on the server.
    pub fn held(self) -> Role {
        Role { held: true, ..self }
    }

    /// A call that reached the fake provider.
    pub fn at_provider(label: impl Into<String>) -> Role {
        Role {
            at_provider: true,
            ..Role::new(label)
        }
    }

    /// Whether `other` is the same kind of request, whatever its position: what folds a run of
    /// exchanges into one row.
    pub fn same_kind(&self, other: &Role) -> bool {
        let shape = |r: &Role| match r.position {
            None => 0,
            Some(Position::Of { .. }) => 1,
            Some(Position::Wave { .. }) => 2,
        };
        self.label == other.label
            && shape(self) == shape(other)
            && (self.held, self.reads_counter, self.resent, self.throttled)
                == (
                    other.held,
                    other.reads_counter,
                    other.resent,
                    other.throttled,
                )
            && self.at_provider == other.at_provider
    }
}

impl From<&str> for Role {
    fn from(label: &str) -> Role {
        Role::new(label)
    }
}

impl From<String> for Role {
    fn from(label: String) -> Role {
        Role::new(label)
    }
}

impl From<&String> for Role {
    fn from(label: &String) -> Role {
        Role::new(label.clone())
    }
}

impl fmt::Display for Role {
    /// `original (held)`, `burst 3/10 7/16`, `duplicate 2, wave 1/3 (throttled)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)?;
        match self.position {
            None => {}
            Some(Position::Of { i, n }) => write!(f, " {i}/{n}")?,
            Some(Position::Wave { i, wave, waves }) => write!(f, " {i}, wave {wave}/{waves}")?,
        }
        for (on, mark) in [
            (self.held, " (held)"),
            (
                self.resent == Some(Resend::NewConnection),
                " (sent again on a new connection)",
            ),
            (
                self.resent == Some(Resend::NewCredential),
                " (sent again with a new credential)",
            ),
            (self.throttled, " (throttled)"),
            (self.at_provider, AT_PROVIDER),
        ] {
            if on {
                f.write_str(mark)?;
            }
        }
        Ok(())
    }
}

impl PartialEq<&str> for Role {
    /// Compares the role as displayed: for tests and for roles read back from a report.
    fn eq(&self, other: &&str) -> bool {
        self.to_string().as_str() == *other
    }
}

impl PartialEq<String> for Role {
    fn eq(&self, other: &String) -> bool {
        self.to_string().as_str() == other.as_str()
    }
}

/// The JSON report keeps the role as the text every other report shows.
impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_as_they_always_have() {
        assert_eq!(Role::new("original").held().to_string(), "original (held)");
        let mut dup = Role::in_wave("duplicate", 2, 1, 3);
        dup.throttled = true;
        assert_eq!(dup.to_string(), "duplicate 2, wave 1/3 (throttled)");
        let mut burst = Role::nth("burst 3/10", 7, 16);
        burst.resent = Some(Resend::NewConnection);
        assert_eq!(
            burst.to_string(),
            "burst 3/10 7/16 (sent again on a new connection)"
        );
        assert_eq!(
            serde_json::to_string(&Role::nth("burst", 1, 2)).unwrap(),
            "\"burst 1/2\""
        );
    }

    #[test]
    fn a_kind_leaves_the_position_out() {
        assert!(Role::nth("burst", 1, 16).same_kind(&Role::nth("burst", 9, 16)));
        assert!(!Role::nth("burst", 1, 16).same_kind(&Role::new("burst")));
        let mut throttled = Role::nth("burst", 2, 16);
        throttled.throttled = true;
        assert!(!throttled.same_kind(&Role::nth("burst", 3, 16)));
        assert!(
            Role::in_wave("duplicate", 1, 1, 2).same_kind(&Role::in_wave("duplicate", 4, 2, 2))
        );
    }
}
