//! The one key factory: each probe states the relation its keys must have to each other (the
//! same key, the same key in another case, its String form, a key needing escapes, …) and the
//! factory derives them in the shape the API accepts, or says the relation cannot be built
//! there. Deriving keys in one place is what keeps a probe's claim true: a case check whose
//! "upper" and "lower" keys are two unrelated UUIDs compares nothing, and an API that folds case
//! passes it. The evidence quotes [`Relation::says`] ("key 4 = key 3 lower-cased"), and
//! [`Relation::holds`] is the property the tests check for every shape.

use std::fmt;

use crate::carrier::KeyShape;
use crate::keys;
use crate::outcome::Stop;

/// What a derived key must be, relative to the key it is derived from (its base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// A new key, unrelated to the base: a different request.
    Different,
    /// The base itself: a retry.
    Same,
    /// The base with every letter upper-cased, and at least one letter changed.
    UpperCased,
    /// The base with every letter lower-cased, and at least one letter changed.
    LowerCased,
    /// The base's value, to be written as an RFC 8941 String (`"key"`).
    Quoted,
    /// The base's value, to be written as a String with a parameter (`"key";v=1`).
    WithParameters,
    /// A value holding the base that written bare is an RFC 8941 Token (RFC 8941 §3.3.4):
    /// `idem-<base>`, or the base itself where the shape admits no prefix (a UUID whose first
    /// character is a letter is a Token).
    BareToken,
    /// The base inside a value whose String form needs both escapes and holds the separators a
    /// naive parser splits at (`,` `;` `=` `"` `\` and a space).
    Escaped,
    /// The base padded to [`keys::OVERSIZED_LEN`] characters, beyond any length bound.
    Oversized,
}

/// Every relation, for the tests that run over all of them.
pub const ALL: [Relation; 9] = [
    Relation::Different,
    Relation::Same,
    Relation::UpperCased,
    Relation::LowerCased,
    Relation::Quoted,
    Relation::WithParameters,
    Relation::BareToken,
    Relation::Escaped,
    Relation::Oversized,
];

impl Relation {
    /// How the evidence says it: "key 4 = key 3 {says}".
    pub fn says(self) -> &'static str {
        match self {
            Relation::Different => "a new key",
            Relation::Same => "the same key",
            Relation::UpperCased => "upper-cased",
            Relation::LowerCased => "lower-cased",
            Relation::Quoted => "the same value as an RFC 8941 String",
            Relation::WithParameters => "the same value as a String with a parameter",
            Relation::BareToken => "an RFC 8941 Token holding it",
            Relation::Escaped => "inside a String that needs escapes and holds separators",
            Relation::Oversized => "padded to 8 KiB",
        }
    }

    /// Whether `derived` stands in this relation to `base`.
    pub fn holds(self, base: &str, derived: &str) -> bool {
        match self {
            Relation::Different => derived != base,
            Relation::Same => derived == base,
            Relation::Quoted | Relation::WithParameters => {
                derived == base && keys::sf_string(base).is_some()
            }
            Relation::UpperCased => derived != base && derived == base.to_ascii_uppercase(),
            Relation::LowerCased => derived != base && derived == base.to_ascii_lowercase(),
            Relation::BareToken => derived.contains(base) && is_sf_token(derived),
            Relation::Escaped => {
                derived.contains(base)
                    && ESCAPED_NEEDS.iter().all(|c| derived.contains(*c))
                    && keys::sf_string(derived).is_some()
            }
            Relation::Oversized => {
                derived.starts_with(base) && derived.chars().count() == keys::OVERSIZED_LEN
            }
        }
    }
}

/// The characters an escaped key holds: two that need an escape in a String, four separators.
const ESCAPED_NEEDS: [char; 6] = ['"', '\\', ',', ';', '=', ' '];

/// Whether `key` written bare is an RFC 8941 Token: a letter (or `*`), then tchar, `:` or `/`.
fn is_sf_token(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'*')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b))
}

/// A relation no key of the shape can have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unbuildable {
    pub shape: KeyShape,
    pub relation: Relation,
}

impl fmt::Display for Unbuildable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the API accepts only keys of shape {} (--key-shape, or learnt by the pre-flight): \
             no key of that shape can be {} ({})",
            self.shape,
            self.relation.says(),
            match self.relation {
                Relation::Escaped => "it must hold quotes, backslashes, commas and spaces",
                Relation::Oversized => "a key that long is within the shape's bound",
                Relation::UpperCased | Relation::LowerCased =>
                    "the shape takes one case only, or the key has no letter of the other case",
                _ => "its characters are outside the shape",
            }
        )
    }
}

impl From<Unbuildable> for Stop {
    /// A relation that cannot be built SKIPs naming the shape: a refusal of a key outside it
    /// would say nothing about what the probe tests.
    fn from(u: Unbuildable) -> Stop {
        Stop::Skip(u.to_string().into())
    }
}

/// Derives keys in the shape the API accepts ([`super::shape`]).
#[derive(Debug, Clone, Copy)]
pub struct KeyFactory {
    shape: KeyShape,
}

impl KeyFactory {
    pub fn new(shape: KeyShape) -> KeyFactory {
        KeyFactory { shape }
    }

    /// A new key: a UUID whose first character is a letter ([`keys::fresh`]), which every
    /// shape admits (a shape's bound is never below a UUID's length).
    pub fn fresh(&self) -> String {
        keys::fresh()
    }

    /// The key in `relation` to `base`, in the shape; [`Unbuildable`] when the shape admits no
    /// such key. The oversized key is the one that may lie outside the shape: being refused is
    /// its point.
    pub fn derive(&self, base: &str, relation: Relation) -> Result<String, Unbuildable> {
        let key = match relation {
            Relation::Different => self.fresh(),
            Relation::Same | Relation::Quoted | Relation::WithParameters => base.to_string(),
            Relation::BareToken if self.shape.admits(&keys::token_key(base)) => {
                keys::token_key(base)
            }
            Relation::BareToken => base.to_string(),
            Relation::UpperCased => base.to_ascii_uppercase(),
            Relation::LowerCased => base.to_ascii_lowercase(),
            Relation::Escaped => keys::escaped_key(base),
            Relation::Oversized => keys::oversized_key(base),
        };
        let in_shape = relation == Relation::Oversized || self.shape.admits(&key);
        let bounded = relation != Relation::Oversized
            || self.shape.max_len.is_none_or(|m| m < keys::OVERSIZED_LEN);
        if in_shape && bounded && relation.holds(base, &key) {
            return Ok(key);
        }
        Err(Unbuildable {
            shape: self.shape,
            relation,
        })
    }

    /// `base` and its key in `relation` as two numbered keys, and the line the evidence shows:
    /// "key 4 = key 3 lower-cased (…)".
    pub fn pair(
        &self,
        (n, base): (usize, &str),
        m: usize,
        relation: Relation,
    ) -> Result<(String, String), Unbuildable> {
        let derived = self.derive(base, relation)?;
        let line = format!("key {m} = key {n} {}: {derived} / {base}", relation.says());
        Ok((derived, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::Alphabet;
    use proptest::prelude::*;

    const ALPHABETS: [Alphabet; 3] = [Alphabet::Any, Alphabet::Uuid, Alphabet::Token];

    fn shapes() -> impl Strategy<Value = KeyShape> {
        (
            prop::sample::select(ALPHABETS.to_vec()),
            prop::option::of(prop::sample::select(vec![36usize, 38, 40, 64, 255, 10_000])),
            any::<bool>(),
        )
            .prop_map(|(alphabet, max_len, lower_case_only)| KeyShape {
                alphabet,
                max_len,
                lower_case_only,
            })
    }

    /// Bases as the probes get them: fresh keys, or keys the factory derived.
    fn bases() -> impl Strategy<Value = String> {
        (any::<u128>(), 0..4u8).prop_map(|(bits, form)| {
            let mut uuid = uuid::Uuid::from_u128(bits).to_string();
            if uuid.as_bytes()[0].is_ascii_digit() {
                uuid.replace_range(0..1, "c");
            }
            match form {
                0 => uuid,
                1 => uuid.to_ascii_uppercase(),
                2 => format!("k-{uuid}"),
                _ => uuid.replace('-', ""),
            }
        })
    }

    proptest! {
        /// Every key the factory derives has its relation to the base and, but for the
        /// oversized key, the shape; what it refuses to build really cannot be.
        #[test]
        fn a_derived_key_has_its_relation_and_the_shape(shape in shapes(), base in bases()) {
            let factory = KeyFactory::new(shape);
            prop_assume!(shape.admits(&base));
            for relation in ALL {
                match factory.derive(&base, relation) {
                    Ok(key) => {
                        prop_assert!(relation.holds(&base, &key), "{relation:?} {base} {key}");
                        if relation != Relation::Oversized {
                            prop_assert!(shape.admits(&key), "{relation:?} {shape} {key}");
                        }
                    }
                    Err(u) => {
                        prop_assert_eq!(u.relation, relation);
                        let why = u.to_string();
                        prop_assert!(why.contains(&shape.to_string()), "{}", why);
                        match relation {
                            Relation::Escaped => prop_assert!(
                                shape.alphabet != Alphabet::Any
                                    || shape.max_len.is_some_and(|m| m < keys::escaped_key(&base).len())
                            ),
                            Relation::UpperCased => prop_assert!(
                                base == base.to_ascii_uppercase()
                                    || !shape.admits(&base.to_ascii_uppercase())
                            ),
                            Relation::LowerCased => prop_assert!(
                                base == base.to_ascii_lowercase()
                                    || !shape.admits(&base.to_ascii_lowercase())
                            ),
                            Relation::Oversized => prop_assert!(
                                shape.max_len.is_some_and(|m| m >= keys::OVERSIZED_LEN)
                            ),
                            Relation::BareToken => {
                                let prefixed = keys::token_key(&base);
                                let prefixed_fits = shape.admits(&prefixed) && is_sf_token(&prefixed);
                                prop_assert!(!is_sf_token(&base) && !prefixed_fits)
                            }
                            Relation::Quoted | Relation::WithParameters => {
                                prop_assert!(keys::sf_string(&base).is_none())
                            }
                            other => prop_assert!(false, "{other:?} must always be buildable"),
                        }
                    }
                }
            }
        }

        /// The case pair of distinct-keys-independent: a fresh key upper-cased, then that key
        /// lower-cased, is the fresh key again, in every shape that takes upper case; one that
        /// takes lower case only cannot hold the pair, and says so.
        #[test]
        fn upper_then_lower_is_the_fresh_key(shape in shapes()) {
            let factory = KeyFactory::new(shape);
            let fresh = factory.fresh();
            let upper = factory.derive(&fresh, Relation::UpperCased);
            if shape.lower_case_only {
                let why = upper.unwrap_err().to_string();
                prop_assert!(why.contains("lower case only"), "{}", why);
                return Ok(());
            }
            let upper = upper.unwrap();
            let (lower, line) = factory.pair((3, &upper), 4, Relation::LowerCased).unwrap();
            prop_assert_eq!(&lower, &fresh);
            prop_assert!(line.starts_with("key 4 = key 3 lower-cased"), "{}", line);
        }
    }

    #[test]
    fn escapes_cannot_be_built_in_a_uuid_or_token_shape() {
        let base = keys::fresh();
        for shape in ["uuid", "token", "token:64"] {
            let u = KeyFactory::new(shape.parse().unwrap())
                .derive(&base, Relation::Escaped)
                .unwrap_err();
            assert!(u.to_string().contains("quotes, backslashes"), "{u}");
        }
        let any = KeyFactory::new(KeyShape::default());
        assert!(any.derive(&base, Relation::Escaped).is_ok());
        assert_eq!(
            KeyFactory::new("uuid".parse().unwrap()).derive(&base, Relation::BareToken),
            Ok(base.clone())
        );
        assert_eq!(
            any.derive(&base, Relation::BareToken),
            Ok(keys::token_key(&base))
        );
    }
}
