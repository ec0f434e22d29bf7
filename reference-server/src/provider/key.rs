//! The provider key: derived from what the server stores durably, never from the body and
//! never drawn per attempt.
//!
//! `ik_` + the first 40 hex digits of SHA-256(tenant `\0` operation `\0` client key): the same
//! client request gets the same provider key on every attempt, after a lost answer, a crash or
//! a lease expiry, in any process; another tenant or another operation with the same client key
//! gets another. 43 characters fit every provider's limit (Square's 45 is the tightest).

use sha2::{Digest, Sha256};

/// How many hex digits of the hash the key keeps.
const HEX_DIGITS: usize = 40;

/// The provider key of the client request `client_key` of `tenant` on `operation`.
pub(crate) fn derive(tenant: &str, operation: &str, client_key: &str) -> String {
    let mut hash = Sha256::new();
    for (i, part) in [tenant, operation, client_key].into_iter().enumerate() {
        if i > 0 {
            hash.update([0]);
        }
        hash.update(part.as_bytes());
    }
    keyed(&hash.finalize())
}

/// The `prov-key-from-body` fault's key: a hash of the provider request (its path and body),
/// so two orders with equal payloads share it.
pub(crate) fn from_request(path: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(path.as_bytes());
    hash.update([0]);
    hash.update(body);
    keyed(&hash.finalize())
}

fn keyed(digest: &[u8]) -> String {
    let mut hex = hex::encode(digest);
    hex.truncate(HEX_DIGITS);
    format!("ik_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_scoped_stable_and_fits_every_limit() {
        let k = derive("tenant-a", "payments.create", "k1");
        assert_eq!(k.len(), 43);
        assert!(k.starts_with("ik_"));
        assert_eq!(k, derive("tenant-a", "payments.create", "k1"));
        assert_ne!(k, derive("tenant-b", "payments.create", "k1"));
        assert_ne!(k, derive("tenant-a", "payouts.create", "k1"));
        // The separator keeps the parts apart: "ab" + "c" is not "a" + "bc".
        assert_ne!(derive("ab", "c", "k"), derive("a", "bc", "k"));
        let expected = Sha256::digest(b"tenant-a\0payments.create\0k1");
        assert_eq!(k[3..], hex::encode(expected)[..40]);
    }
}
