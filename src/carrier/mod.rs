//! Where a request carries its idempotency key, how the key is written, and which keys the API
//! accepts: one description for every command (`run`, `stress`, `client`). The IETF draft's
//! `Idempotency-Key` header holds an RFC 8941 String, but providers carry keys elsewhere: their
//! own header with an opaque token (`Cko-Idempotency-Key`, `PayPal-Request-Id`, whose APIs
//! refuse quotes), or a field of the body (Square's `idempotency_key`). Judging those by the
//! draft's rules would fail correct APIs and clients, so the carrier is said once and shown in
//! every report's header.

use std::fmt;
use std::str::FromStr;

mod placement;

pub use placement::{field_of, set_field};

/// The draft's header, the only carrier whose default syntax is `ietf`.
pub const IETF_HEADER: &str = "Idempotency-Key";

/// Where the key travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A header, by name.
    Header(String),
    /// A field of the body: a JSON pointer (`/idempotency_key`) for JSON bodies, the field's
    /// name for form bodies.
    Body(String),
}

impl Place {
    /// The draft's header.
    pub fn ietf() -> Place {
        Place::Header(IETF_HEADER.into())
    }

    /// What evidence calls the place: `Idempotency-Key`, `body /idempotency_key`.
    pub fn label(&self) -> String {
        match self {
            Place::Header(name) => name.clone(),
            Place::Body(pointer) => format!("body {pointer}"),
        }
    }

    /// The header's name, when the key travels in one.
    pub fn header(&self) -> Option<&str> {
        match self {
            Place::Header(name) => Some(name),
            Place::Body(_) => None,
        }
    }
}

impl fmt::Display for Place {
    /// `header Idempotency-Key`, `body /idempotency_key`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Header(name) => write!(f, "header {name}"),
            Place::Body(pointer) => write!(f, "body {pointer}"),
        }
    }
}

/// How the key's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// An RFC 8941 String, the draft's field (the suite says whether bare values pass too).
    Ietf,
    /// An opaque value under the provider's own rules: quotes are neither needed nor wanted.
    Token,
}

impl FromStr for Syntax {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ietf" => Ok(Syntax::Ietf),
            "token" => Ok(Syntax::Token),
            other => Err(format!("{other:?} is not a key syntax (ietf or token)")),
        }
    }
}

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Syntax::Ietf => "ietf",
            Syntax::Token => "token",
        })
    }
}

/// Which characters a key the API accepts may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Alphabet {
    /// Anything the carrier can hold.
    #[default]
    Any,
    /// A UUID in its hyphenated form (36 characters).
    Uuid,
    /// `[A-Za-z0-9_-]`.
    Token,
}

/// The keys an API accepts: `KIND[:MAX]`, where KIND is `any`, `uuid` or `token`
/// (`[A-Za-z0-9_-]`) and MAX the longest key in characters (`token:64`, `any:255`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyShape {
    pub alphabet: Alphabet,
    pub max_len: Option<usize>,
    /// Upper-case letters are refused (an API that checks lower-case UUIDs by pattern): only
    /// the pre-flight learns it, since every generated key is lower-case.
    pub lower_case_only: bool,
}

/// How long every generated key is ([`crate::keys::fresh`]: a UUID), so a shape with a shorter
/// limit is refused before anything is sent.
pub const GENERATED_KEY_LEN: usize = 36;

impl KeyShape {
    /// Whether the API accepts `key`.
    pub fn admits(&self, key: &str) -> bool {
        let alphabet = match self.alphabet {
            Alphabet::Any => true,
            Alphabet::Uuid => key.len() == 36 && uuid::Uuid::try_parse(key).is_ok(),
            Alphabet::Token => key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        };
        let case = !self.lower_case_only || !key.bytes().any(|b| b.is_ascii_uppercase());
        alphabet && case && self.max_len.is_none_or(|max| key.chars().count() <= max)
    }
}

impl FromStr for KeyShape {
    type Err = String;
    /// Parses `KIND[:MAX]`, refusing a shape no generated key can meet.
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, max) = match s.split_once(':') {
            Some((kind, max)) => (kind, Some(max)),
            None => (s, None),
        };
        let alphabet = match kind {
            "any" => Alphabet::Any,
            "uuid" => Alphabet::Uuid,
            "token" => Alphabet::Token,
            other => {
                return Err(format!(
                    "{other:?} is not a key shape: write uuid, token or any, optionally with \
                     :MAX, e.g. token:64"
                ))
            }
        };
        let max_len = match max {
            None => None,
            Some(n) => Some(n.parse::<usize>().map_err(|_| {
                format!("{s:?}: {n:?} is not a length; write {kind}:MAX with MAX a whole number")
            })?),
        };
        if let Some(max) = max_len.filter(|m| *m < GENERATED_KEY_LEN) {
            return Err(format!(
                "{s:?}: no generated key can meet it, keys are UUIDs of {GENERATED_KEY_LEN} \
                 characters (more than {max})"
            ));
        }
        Ok(KeyShape {
            alphabet,
            max_len,
            lower_case_only: false,
        })
    }
}

impl fmt::Display for KeyShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.alphabet {
            Alphabet::Any => "any",
            Alphabet::Uuid => "uuid",
            Alphabet::Token => "token",
        })?;
        if let Some(max) = self.max_len {
            write!(f, ":{max}")?;
        }
        if self.lower_case_only {
            f.write_str(" (lower case only)")?;
        }
        Ok(())
    }
}

/// A key's carrier, syntax and accepted shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCarrier {
    pub place: Place,
    pub syntax: Syntax,
    pub shape: KeyShape,
    /// `--key-required`: the API requires the key, so a keyless request that executes is a
    /// failure whatever the carrier (a provider's key is otherwise taken as optional).
    pub required: bool,
    /// `--key-in-body` names a member the body lacks: every request gets it, put into its
    /// parent object, and the header line says so.
    pub put_into_body: bool,
}

impl KeyCarrier {
    /// The carrier at `place`, written as `syntax` when the user said so, else `ietf` for the
    /// draft's header and `token` for every other carrier; any key shape.
    pub fn new(place: Place, syntax: Option<Syntax>) -> KeyCarrier {
        let syntax = syntax.unwrap_or(match &place {
            Place::Header(name) if name.eq_ignore_ascii_case(IETF_HEADER) => Syntax::Ietf,
            _ => Syntax::Token,
        });
        KeyCarrier {
            place,
            syntax,
            shape: KeyShape::default(),
            required: false,
            put_into_body: false,
        }
    }

    /// The draft's header with the draft's syntax.
    pub fn ietf_header() -> KeyCarrier {
        KeyCarrier::new(Place::ietf(), None)
    }

    /// What evidence calls the key's place: `Idempotency-Key`, `body /idempotency_key`.
    pub fn label(&self) -> String {
        self.place.label()
    }

    /// The header's name, when the key travels in one.
    pub fn header(&self) -> Option<&str> {
        self.place.header()
    }
}

impl fmt::Display for KeyCarrier {
    /// The report's header line: `header Idempotency-Key, ietf`, `body /idempotency_key, token`,
    /// and the shape when one was given (`header X-Key, token, uuid`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", self.place, self.syntax)?;
        if self.shape != KeyShape::default() {
            write!(f, ", {}", self.shape)?;
        }
        if self.put_into_body {
            f.write_str(", put into the body")?;
        }
        if self.required {
            f.write_str(", required")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_drafts_header_defaults_to_ietf() {
        assert_eq!(KeyCarrier::ietf_header().syntax, Syntax::Ietf);
        let lower = KeyCarrier::new(Place::Header("idempotency-key".into()), None);
        assert_eq!(lower.syntax, Syntax::Ietf);
        let cko = KeyCarrier::new(Place::Header("Cko-Idempotency-Key".into()), None);
        assert_eq!(cko.syntax, Syntax::Token);
        let body = KeyCarrier::new(Place::Body("/idempotency_key".into()), None);
        assert_eq!(body.to_string(), "body /idempotency_key, token");
        let forced = KeyCarrier::new(Place::Header("Idempotency-Key".into()), Some(Syntax::Token));
        assert_eq!(forced.to_string(), "header Idempotency-Key, token");
    }

    #[test]
    fn shapes_parse_and_admit() {
        let uuid: KeyShape = "uuid".parse().unwrap();
        let fresh = crate::keys::fresh();
        assert_eq!(fresh.len(), GENERATED_KEY_LEN);
        assert!(uuid.admits(&fresh));
        assert!(!uuid.admits("K-1"));
        let token: KeyShape = "token:64".parse().unwrap();
        assert!(token.admits(&fresh) && token.admits("a_b-C"));
        assert!(!token.admits("a b") && !token.admits(&"k".repeat(65)));
        assert_eq!(token.to_string(), "token:64");
        assert_eq!("any".parse::<KeyShape>().unwrap(), KeyShape::default());
        for bad in ["hex", "token:", "token:x", "uuid:20", "any:0"] {
            assert!(bad.parse::<KeyShape>().is_err(), "{bad}");
        }
        let e = "token:8".parse::<KeyShape>().unwrap_err();
        assert!(e.contains("no generated key can meet"), "{e}");
    }
}
