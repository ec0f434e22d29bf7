//! `Idempotency-Key` parsing (draft §2.1, RFC 8941).
//!
//! The header is an Item whose bare value MUST be an sf-string. Parameters are allowed by the
//! Item grammar and ignored here: they are not part of the key. Anything else — a token, a
//! number, a byte sequence, an inner list, two header lines (which combine into a List), a bad
//! escape, non-ASCII — is a client error, answered 400 before any key is claimed. Several
//! faults replace this parser with a plausible but wrong one.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use sfv::{BareItem, FieldType, Item, Parser, Version};
use sha2::Digest;

use crate::config::Fault;
use crate::problem::Problem;

/// The longest key accepted, in characters. Long enough for any UUID or ULID with a prefix,
/// short enough that a stored key cannot be used to bloat the database.
pub const MAX_KEY_LEN: usize = 255;

/// Why a request's key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("this operation requires an Idempotency-Key header")]
    Missing,
    #[error("send exactly one Idempotency-Key header line; got {0}")]
    Repeated(usize),
    #[error("Idempotency-Key is not a valid RFC 8941 Item: {0}")]
    Syntax(String),
    #[error("Idempotency-Key must be an RFC 8941 String (quoted), not {0}")]
    NotString(&'static str),
    #[error("Idempotency-Key must be a bare token, not {0}")]
    NotToken(&'static str),
    #[error("Idempotency-Key must not contain a comma")]
    Comma,
    #[error("Idempotency-Key must not be empty")]
    Empty,
    #[error("Idempotency-Key is {0} characters long; the limit is {MAX_KEY_LEN}")]
    TooLong(usize),
    #[error("this operation requires the idempotency key in the body at {0}")]
    MissingField(String),
    #[error("the idempotency key at {0} must be a JSON string, not {1}")]
    NotText(String, &'static str),
    #[error("the idempotency key must not contain control characters")]
    Control,
}

impl KeyError {
    /// The 400 problem for this error (never a 5xx, whatever the header held).
    pub(crate) fn problem(&self) -> Problem {
        let (slug, title) = match self {
            KeyError::Missing | KeyError::MissingField(_) => {
                ("key-required", "Idempotency-Key required")
            }
            _ => ("key-invalid", "Invalid Idempotency-Key"),
        };
        Problem::new(StatusCode::BAD_REQUEST, slug, title, self.to_string()).idempotency()
    }
}

/// The key to look up, as the configured (possibly faulty) parser understands the key header
/// `name`.
pub(crate) fn parse(
    headers: &HeaderMap,
    name: &str,
    fault: Option<Fault>,
) -> Result<String, KeyError> {
    let lines: Vec<&HeaderValue> = headers.get_all(name).iter().collect();
    let first = *lines.first().ok_or(KeyError::Missing)?;
    if fault == Some(Fault::QuotesLiteral) {
        let raw = lines
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
            .collect::<Vec<_>>()
            .join(", ");
        return if raw.trim().is_empty() {
            Err(KeyError::Empty)
        } else {
            Ok(raw)
        };
    }
    if lines.len() > 1 && fault != Some(Fault::DuplicateHeaderFirst) {
        return Err(KeyError::Repeated(lines.len()));
    }
    let raw = first.as_bytes();
    if fault == Some(Fault::SplitOnComma) && raw.contains(&b',') {
        return Err(KeyError::Comma);
    }
    let item: Item = Parser::new(raw)
        .with_version(Version::Rfc8941)
        .parse()
        .map_err(|e| KeyError::Syntax(e.to_string()))?;
    let mut key = match (&item.bare_item, fault) {
        (BareItem::Token(token), Some(Fault::RejectQuoted)) => token.as_str().to_owned(),
        (other, Some(Fault::RejectQuoted)) => return Err(KeyError::NotToken(kind(other))),
        (BareItem::String(s), _) => s.as_str().to_owned(),
        (other, _) => return Err(KeyError::NotString(kind(other))),
    };
    if fault == Some(Fault::ParamsInKey) {
        key = item.serialize();
    }
    bounded(key, fault)
}

/// Takes the key out of the JSON body `body` at `pointer` (the `--key-in-body` carrier): an
/// opaque token, a JSON string without control characters, bounded like a header's key. The
/// field is removed, so what is left is the payload alone.
pub(crate) fn take_from_body(
    body: &mut serde_json::Value,
    pointer: &str,
    fault: Option<Fault>,
) -> Result<String, KeyError> {
    let (parent, name) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    let name = name.replace("~1", "/").replace("~0", "~");
    let value = body
        .pointer_mut(parent)
        .and_then(serde_json::Value::as_object_mut)
        .and_then(|fields| fields.remove(&name))
        .ok_or_else(|| KeyError::MissingField(pointer.to_owned()))?;
    let key = match value {
        serde_json::Value::String(key) => key,
        serde_json::Value::Null => return Err(KeyError::NotText(pointer.to_owned(), "null")),
        serde_json::Value::Bool(_) => {
            return Err(KeyError::NotText(pointer.to_owned(), "a boolean"))
        }
        serde_json::Value::Number(_) => {
            return Err(KeyError::NotText(pointer.to_owned(), "a number"))
        }
        serde_json::Value::Array(_) => {
            return Err(KeyError::NotText(pointer.to_owned(), "an array"))
        }
        serde_json::Value::Object(_) => {
            return Err(KeyError::NotText(pointer.to_owned(), "an object"))
        }
    };
    if key.chars().any(char::is_control) {
        return Err(KeyError::Control);
    }
    bounded(key, fault)
}

/// `key` unless it is empty or too long, under the faults that change those limits or fold
/// case: the checks every carrier shares.
fn bounded(mut key: String, fault: Option<Fault>) -> Result<String, KeyError> {
    if key.is_empty() && fault != Some(Fault::AcceptEmpty) {
        return Err(KeyError::Empty);
    }
    let len = key.chars().count();
    if len > MAX_KEY_LEN && fault != Some(Fault::NoKeyLimit) {
        return Err(KeyError::TooLong(len));
    }
    if fault == Some(Fault::CaseInsensitiveKeys) {
        key = key.to_lowercase();
    }
    Ok(key)
}

fn kind(item: &BareItem) -> &'static str {
    match item {
        BareItem::Decimal(_) => "a Decimal",
        BareItem::Integer(_) => "an Integer",
        BareItem::String(_) => "a String",
        BareItem::ByteSequence(_) => "a Byte Sequence",
        BareItem::Boolean(_) => "a Boolean",
        BareItem::Token(_) => "a Token",
        BareItem::Date(_) => "a Date",
        BareItem::DisplayString(_) => "a Display String",
    }
}

/// A short, non-reversible rendering of a key for logs: keys are client data that may be
/// guessable or sensitive, but an operator still needs to correlate log lines.
pub(crate) fn mask(key: &str) -> String {
    let prefix: String = key.chars().take(4).collect();
    let digest = super::fingerprint::hex(&sha2::Sha256::digest(key.as_bytes()));
    format!("{prefix}…#{}", &digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_KEY_HEADER;

    fn headers(lines: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            if let Ok(value) = HeaderValue::from_bytes(line) {
                map.append("idempotency-key", value);
            }
        }
        map
    }

    fn parse_one(raw: &[u8], fault: Option<Fault>) -> Result<String, KeyError> {
        parse(&headers(&[raw]), DEFAULT_KEY_HEADER, fault)
    }

    #[test]
    fn strings_are_keys_and_parameters_are_ignored() {
        assert_eq!(parse_one(br#""abc""#, None), Ok("abc".into()));
        assert_eq!(
            parse_one(br#" "a, \"b\" \\c" "#, None),
            Ok(r#"a, "b" \c"#.into())
        );
        assert_eq!(parse_one(br#""abc";v=1"#, None), Ok("abc".into()));
    }

    #[test]
    fn everything_else_is_refused() {
        for raw in [
            &b"abc"[..],
            b"1",
            b"?1",
            b":YWJj:",
            br#"("a" "b")"#,
            br#""abc"#,
            br#""a\b""#,
            "\"é\"".as_bytes(),
            b"\"a\tb\"",
            br#""""#,
            br#""a", "b""#,
        ] {
            assert!(parse_one(raw, None).is_err(), "{raw:?} accepted");
        }
        let long = format!("\"{}\"", "k".repeat(MAX_KEY_LEN + 1));
        assert_eq!(
            parse_one(long.as_bytes(), None),
            Err(KeyError::TooLong(MAX_KEY_LEN + 1))
        );
        assert_eq!(
            parse(&headers(&[br#""a""#, br#""a""#]), DEFAULT_KEY_HEADER, None),
            Err(KeyError::Repeated(2))
        );
        assert_eq!(
            parse(&HeaderMap::new(), DEFAULT_KEY_HEADER, None),
            Err(KeyError::Missing)
        );
    }

    #[test]
    fn faults_change_the_parser() {
        assert_eq!(
            parse_one(b"abc", Some(Fault::RejectQuoted)),
            Ok("abc".into())
        );
        assert!(parse_one(br#""abc""#, Some(Fault::RejectQuoted)).is_err());
        assert_eq!(
            parse_one(br#""abc"#, Some(Fault::QuotesLiteral)),
            Ok("\"abc".into())
        );
        assert_eq!(
            parse_one(br#""a,b""#, Some(Fault::SplitOnComma)),
            Err(KeyError::Comma)
        );
        assert_eq!(
            parse(
                &headers(&[br#""a""#, br#""b""#]),
                DEFAULT_KEY_HEADER,
                Some(Fault::DuplicateHeaderFirst)
            ),
            Ok("a".into())
        );
        assert_eq!(
            parse_one(br#""""#, Some(Fault::AcceptEmpty)),
            Ok(String::new())
        );
        assert_eq!(
            parse_one(br#""k";v=1"#, Some(Fault::ParamsInKey)),
            Ok(r#""k";v=1"#.into())
        );
        assert_eq!(
            parse_one(br#""AbC""#, Some(Fault::CaseInsensitiveKeys)),
            Ok("abc".into())
        );
    }

    #[test]
    fn masks_hide_all_but_a_prefix() {
        let masked = mask("secret-key-123");
        assert!(masked.starts_with("secr…#"));
        assert!(!masked.contains("key-123"));
    }
}
