//! Design servers whose keys have a shape of their own (fixtures/servers/uuid_column.py,
//! uuid_lower.py, token_empty.py) or whose store races on return (store_reconnect.py): every
//! key a probe claims a relation for is the key it sent, whatever shape the API accepts, and
//! what the pre-flight learns is the same on every run. Each table runs five times, each time
//! against a new server, and must come out the same.

use crate::design_servers::{assert_says, expect, full, Run};

/// How many times each table runs.
const RUNS: usize = 5;

/// [`expect`] [`RUNS`] times, each against a new server: the same table every time. Returns the
/// last run for the design's further assertions.
fn five_times(
    design: &str,
    server_args: &[&str],
    args: &[&str],
    except: &[(&str, &str)],
    exit: i32,
) -> Run {
    let mut last = None;
    for _ in 0..RUNS {
        last = Some(expect(design, server_args, args, except, exit));
    }
    last.expect("at least one run")
}

/// The RFC 8941 String form and the keys no UUID can be, on an API that takes bare UUIDs only:
/// quoted-key FAILs on the refused String form (the pre-flight then sends keys bare),
/// key-parameters follows from it, and escaped-key's key cannot be a UUID (SKIP naming it).
const UUID_KEYS: [(&str, &str); 3] = [
    ("quoted-key", "FAIL"),
    ("escaped-key", "SKIP"),
    ("key-parameters", "INCONCLUSIVE"),
];

/// A Django UUIDField folds case and answers every hit with what it stored: key 4 of
/// distinct-keys-independent is key 3 lower-cased, so the second operation answered with the
/// first one's result is seen (FAIL; it PASSed when the pair was two unrelated UUIDs), and a
/// reused key with another payload is replayed instead of refused (payload-mismatch FAILs).
#[test]
fn a_uuid_column_that_folds_case_fails_distinct_keys() {
    let mut except = UUID_KEYS.to_vec();
    except.extend([
        ("payload-mismatch", "FAIL"),
        ("distinct-keys-independent", "FAIL"),
    ]);
    let run = five_times("uuid_column", &[], &full(), &except, 4);
    assert_says(
        &run.timeline("distinct-keys-independent"),
        "key 4 = key 3 lower-cased",
        "the evidence shows the relation the keys had",
    );
    assert_says(
        run.reason("distinct-keys-independent"),
        "two keys that differ only in case execute twice",
        "the case check decides",
    );
    assert_says(
        &run.stdout,
        "key shape: uuid, learnt from the trials: #",
        "the report says what the pre-flight learnt and from which exchange",
    );
}

/// An API that takes only lower-case UUIDs refuses key 3 (upper-cased) with 400 as malformed:
/// nothing was executed for it, so nothing says whether the API folds case, and
/// distinct-keys-independent is INCONCLUSIVE naming the refusal (it FAILed, "got 1 execution").
#[test]
fn a_uuid_api_refusing_upper_case_is_not_failed_for_folding_case() {
    let mut except = UUID_KEYS.to_vec();
    except.push(("distinct-keys-independent", "INCONCLUSIVE"));
    let run = five_times("uuid_lower", &[], &full(), &except, 4);
    assert_says(
        run.reason("distinct-keys-independent"),
        "was refused as malformed (#",
        "the INCONCLUSIVE names the refusal",
    );
}
