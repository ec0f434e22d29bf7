//! Which request header is an idempotency key.
//!
//! A header parameter counts when
//! 1. its name contains `idempot` in any case (`Idempotency-Key`, `X-Idempotency-Key`,
//!    `Idempotent-Key`, …);
//! 2. its name is one of [`KNOWN_ALIASES`] or of the names given with `--key-header`
//!    (case-insensitive): APIs that carry the key under another name;
//! 3. its description says so (mentions idempotency): documents that declare the header only in
//!    prose, under a generic name.
//!
//! A header such as `X-Request-Id` whose description speaks of tracing is none of these, and is
//! not taken for a key.

/// Header names that carry an idempotency key without saying "idempot".
pub const KNOWN_ALIASES: &[&str] = &[
    // PayPal REST APIs.
    "PayPal-Request-Id",
    // AWS APIs (EC2 and others take a client token for idempotent requests).
    "X-Amz-Client-Token",
];

/// How a header was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Match {
    /// The name contains "idempot".
    Name,
    /// A known alias or a `--key-header` name.
    Alias,
    /// The description says it is an idempotency key.
    Description,
}

/// Whether a header parameter named `name`, described by `description`, is an idempotency key.
pub fn recognise(name: &str, description: Option<&str>, extra: &[String]) -> Option<Match> {
    if name.to_ascii_lowercase().contains("idempot") {
        return Some(Match::Name);
    }
    let alias = KNOWN_ALIASES
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .any(|a| a.eq_ignore_ascii_case(name));
    if alias {
        return Some(Match::Alias);
    }
    description
        .filter(|d| d.to_ascii_lowercase().contains("idempoten"))
        .map(|_| Match::Description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_prose() {
        for name in [
            "Idempotency-Key",
            "idempotency-key",
            "X-Idempotency-Key",
            "Idempotent-Key",
        ] {
            assert_eq!(recognise(name, None, &[]), Some(Match::Name), "{name}");
        }
        for name in ["PayPal-Request-Id", "x-amz-client-token"] {
            assert_eq!(recognise(name, None, &[]), Some(Match::Alias), "{name}");
        }
        assert_eq!(
            recognise("X-Dedup", None, &["x-dedup".to_string()]),
            Some(Match::Alias)
        );
        assert_eq!(
            recognise(
                "X-Client-Ref",
                Some("Idempotency key: retries with it never repeat"),
                &[]
            ),
            Some(Match::Description)
        );
        assert_eq!(
            recognise(
                "X-Request-Id",
                Some("A unique id for tracing the request"),
                &[]
            ),
            None
        );
    }
}
