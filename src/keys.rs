//! Idempotency keys on the wire: the syntax a suite expects, and the malformed corpus.
//!
//! Draft-07 §2.1 makes the key an RFC 8941 Item whose value is an sf-string (`"…"`); Stripe and
//! others use a bare value. Encoding goes through the `sfv` crate so escapes are exactly RFC
//! 8941's, never a hand-rolled approximation.

use std::str::FromStr;

/// How a key is written in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySyntax {
    /// An RFC 8941 sf-string: `"8e03978e-…"` (draft-07 §2.1).
    SfString,
    /// The bare value: `8e03978e-…` (Stripe and many others).
    Bare,
}

impl FromStr for KeySyntax {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sf-string" => Ok(KeySyntax::SfString),
            "bare" => Ok(KeySyntax::Bare),
            other => Err(format!("{other:?} is not a key syntax (sf-string or bare)")),
        }
    }
}

impl KeySyntax {
    /// The header value for `key`.
    pub fn encode(self, key: &str) -> String {
        match self {
            KeySyntax::SfString => sf_string(key).unwrap_or_else(|| key.to_string()),
            KeySyntax::Bare => key.to_string(),
        }
    }
}

/// How keys are written on the wire for a run (`--key-form`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyForm {
    /// Always the RFC 8941 String form (`"…"`).
    Quoted,
    /// Always the bare value.
    Bare,
    /// The suite's form; when the suite's form is the String and the API refuses it at the
    /// pre-flight but accepts the same key bare, every probe but the key-syntax ones that test
    /// the String form runs with bare keys, and every report says so.
    #[default]
    Auto,
}

impl FromStr for KeyForm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "quoted" => Ok(KeyForm::Quoted),
            "bare" => Ok(KeyForm::Bare),
            "auto" => Ok(KeyForm::Auto),
            other => Err(format!(
                "{other:?} is not a key form (quoted, bare or auto)"
            )),
        }
    }
}

impl KeyForm {
    /// The syntax a run starts with under suite syntax `suite`.
    pub fn initial(self, suite: KeySyntax) -> KeySyntax {
        match self {
            KeyForm::Quoted => KeySyntax::SfString,
            KeyForm::Bare => KeySyntax::Bare,
            KeyForm::Auto => suite,
        }
    }

    /// Whether the pre-flight may fall back from the String form to bare keys.
    pub fn may_fall_back(self, suite: KeySyntax) -> bool {
        self == KeyForm::Auto && suite == KeySyntax::SfString
    }
}

/// What the reports say when a run fell back to bare keys.
pub const FELL_BACK: &str = "keys sent bare: the API refused the RFC 8941 String form";

/// A fresh key: a UUIDv4 whose first character is a letter, so that written bare it is an RFC
/// 8941 Token as well as an opaque string — APIs that parse bare keys as structured fields
/// accept it too, and a key never reads as a number.
pub fn fresh() -> String {
    let mut key = uuid::Uuid::new_v4().to_string().into_bytes();
    if key[0].is_ascii_digit() {
        key[0] = b'a' + (key[0] - b'0') % 6;
    }
    String::from_utf8(key).unwrap_or_default()
}

/// `key` serialised as an RFC 8941 String (`None` if it holds characters a String cannot).
pub fn sf_string(key: &str) -> Option<String> {
    let s = sfv::StringRef::from_str(key).ok()?;
    Some(sfv::ItemSerializer::new().bare_item(s).finish())
}

/// A value that is a legal sf-string but exercises every escape and separator a naive parser
/// trips on: a comma (a list separator), a semicolon and an equals sign (what starts a
/// parameter), an escaped quote, an escaped backslash and a space.
pub fn escaped_key(unique: &str) -> String {
    format!("pay, \"ref\"; v=\\ {unique}")
}

/// A key that is a legal sf-token (RFC 8941 §3.3.4: it starts with a letter), so that written
/// bare it is a Token and written quoted a String of the same characters.
pub fn token_key(uuid: &str) -> String {
    format!("idem-{uuid}")
}

/// The length of the oversized key: 8 KiB, far beyond any published key limit (Stripe: 255) yet
/// within every HTTP server's header budget, so a refusal is the key check's, not the parser's.
pub const OVERSIZED_LEN: usize = 8 * 1024;

/// A printable key of exactly [`OVERSIZED_LEN`] characters starting with `uuid`.
pub fn oversized_key(uuid: &str) -> String {
    let mut key = uuid.to_string();
    key.extend(std::iter::repeat_n(
        'k',
        OVERSIZED_LEN.saturating_sub(key.len()),
    ));
    key
}

/// `key` as an sf-string Item carrying a parameter (`"key";v=1`): RFC 8941 allows parameters
/// on an Item, and they are not part of its value.
pub fn with_parameter(key: &str) -> String {
    format!("{};v=1", KeySyntax::SfString.encode(key))
}

/// One malformed header value and what makes it malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub label: &'static str,
    pub value: Vec<u8>,
}

/// The malformed-key corpus of the catalog row, each made unique by `uuid` so a server that
/// wrongly accepts one cannot replay an earlier run's record instead of executing.
pub fn malformed_corpus(uuid: &str) -> Vec<Malformed> {
    use base64::Engine;
    let simple = uuid.replace('-', "");
    let number = u64::from_str_radix(&simple[..12], 16).unwrap_or(1) % 999_999_999_999_999;
    let bytes = base64::engine::general_purpose::STANDARD.encode(simple.as_bytes());
    let m = |label, value: String| Malformed {
        label,
        value: value.into_bytes(),
    };
    vec![
        m("unterminated quote", format!("\"{uuid}")),
        m("bad escape", format!("\"{uuid}\\q\"")),
        Malformed {
            label: "non-ASCII",
            value: format!("\"{uuid}-clé\"").into_bytes(),
        },
        Malformed {
            label: "control character",
            value: [b"\"".as_slice(), uuid.as_bytes(), b"\x01\"".as_slice()].concat(),
        },
        m("inner list", format!("(\"{uuid}\")")),
        m("integer", number.to_string()),
        m("boolean", format!("?1;n=\"{uuid}\"")),
        m("byte sequence", format!(":{bytes}:")),
    ]
}

/// The malformed keys of a provider's token header: a token has no
/// quoting or structure to break, so only what no key may hold is sent — a control character.
pub fn malformed_token(uuid: &str) -> Vec<Malformed> {
    vec![Malformed {
        label: "control character",
        value: [uuid.as_bytes(), b"\x01".as_slice()].concat(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_keys_are_tokens_and_uuids() {
        for _ in 0..64 {
            let key = fresh();
            assert!(uuid::Uuid::parse_str(&key).is_ok(), "{key}");
            let item = sfv::Parser::new(key.as_bytes()).parse_item::<sfv::Item>();
            assert!(item.unwrap().bare_item.as_token().is_some(), "{key}");
        }
    }

    #[test]
    fn sf_string_escapes_quotes_and_backslashes() {
        assert_eq!(sf_string("abc").unwrap(), "\"abc\"");
        assert_eq!(
            sf_string(&escaped_key("u")).unwrap(),
            r#""pay, \"ref\"; v=\\ u""#
        );
        assert!(sf_string("clé").is_none());
    }

    #[test]
    fn the_syntax_corpus_parses_as_intended() {
        let uuid = "0b9a2a8e-1111-4222-8333-444455556666";
        let token = token_key(uuid);
        let bare = sfv::Parser::new(token.as_bytes()).parse_item::<sfv::Item>();
        assert!(bare.unwrap().bare_item.as_token().is_some());
        let big = oversized_key(uuid);
        assert_eq!(big.len(), OVERSIZED_LEN);
        assert!(sf_string(&big).is_some());
        let p = with_parameter(uuid);
        let item = sfv::Parser::new(p.as_bytes())
            .parse_item::<sfv::Item>()
            .unwrap();
        assert_eq!(item.bare_item.as_string().map(|s| s.as_str()), Some(uuid));
        assert_eq!(item.params.len(), 1);
    }

    #[test]
    fn every_malformed_value_is_rejected_by_an_rfc8941_item_parser_as_a_string() {
        for m in malformed_corpus("0b9a2a8e-1111-4222-8333-444455556666") {
            let parsed = sfv::Parser::new(&m.value).parse_item::<sfv::Item>();
            let is_string = parsed
                .as_ref()
                .map(|i| i.bare_item.as_string().is_some())
                .unwrap_or(false);
            assert!(!is_string, "{} parsed as a String", m.label);
        }
    }
}
