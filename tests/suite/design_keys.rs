//! Design servers whose keys have a shape of their own (fixtures/servers/uuid_column.py,
//! uuid_lower.py, token_empty.py) or whose store races on return (store_reconnect.py): every
//! key a probe claims a relation for is the key it sent, whatever shape the API accepts, and
//! what the pre-flight learns is the same on every run. Each table runs five times, each time
//! against a new server, and must come out the same; the five run side by side, as the design
//! tables do (no verdict depends on how busy the machine is), so a run that waits out a held
//! request's timeout does not make the others wait.

use crate::design_servers::{assert_says, expect, full, post_cmd, Run};

/// How many times each table runs.
const RUNS: usize = 5;

/// [`expect`] [`RUNS`] times at once, each against a new server: the same table every time.
/// Returns the last run for the design's further assertions; a run that differs fails the test
/// with its own message.
fn five_times(
    design: &str,
    server_args: &[&str],
    args: &[&str],
    except: &[(&str, &str)],
    exit: i32,
) -> Run {
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RUNS)
            .map(|_| s.spawn(|| expect(design, server_args, args, except, exit)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    runs.into_iter().last().expect("at least one run")
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

/// An API that takes only lower-case UUIDs refuses an upper-cased key with 400 as malformed:
/// the pre-flight's case trial learns it, so no key of the shape can be key 3 upper-cased, and
/// distinct-keys-independent SKIPs naming the shape (it FAILed, "got 1 execution", on a key
/// that executed nothing). The same with `--key-shape uuid`: the flag's shape is checked, and
/// its case learnt, by the same trials.
#[test]
fn a_uuid_api_refusing_upper_case_is_not_failed_for_folding_case() {
    let mut except = UUID_KEYS.to_vec();
    except.push(("distinct-keys-independent", "SKIP"));
    let run = five_times("uuid_lower", &[], &full(), &except, 4);
    assert_says(
        run.reason("distinct-keys-independent"),
        "shape uuid (lower case only)",
        "the SKIP names the shape",
    );
    assert_says(
        &run.stdout,
        "400 to an upper-cased key",
        "the report names the exchange the case was learnt from",
    );
    let args = [&full()[..], &["--key-shape", "uuid"]].concat();
    let run = expect("uuid_lower", &[], &args, &except, 4);
    assert_says(
        &run.stdout,
        "key shape: uuid (lower case only) (--key-shape; #",
        "the flag and what the trials added to it",
    );
}

/// What the pre-flight learns rests on clear answers: the first key that is not a UUID is
/// answered 503 once (a worker not ready), and the trial is sent again with a new key until a
/// 400 settles the shape, so the table is the UUID column's own, and the report names both
/// exchanges. (Before, that one 503 ended the trials with no shape learnt, and the
/// shape-dependent probes ran with keys the API can never accept.)
#[test]
fn one_unclear_answer_does_not_decide_the_key_shape() {
    let mut except = UUID_KEYS.to_vec();
    except.extend([
        ("payload-mismatch", "FAIL"),
        ("distinct-keys-independent", "FAIL"),
    ]);
    let run = five_times("uuid_column", &["--unavailable-once"], &full(), &except, 4);
    assert_says(
        &run.stdout,
        "503, #",
        "the report names the unclear answer and the one that settled the shape",
    );
    assert_says(
        &run.stdout,
        "400 to a key that is not a UUID",
        "the report says which answer the shape rests on",
    );
}

/// The token design's own header, and the draft's syntax probes a token skips.
fn token() -> Vec<&'static str> {
    let mut args = full();
    args.extend(["--key-header", "X-Idempotency-Key"]);
    args
}

/// The probes of the draft's RFC 8941 field, which SKIP for a token carrier, and missing-key,
/// which SKIPs because the key is optional there.
fn token_skips() -> Vec<(&'static str, &'static str)> {
    let mut except: Vec<(&str, &str)> =
        ["quoted-key", "escaped-key", "bare-token", "key-parameters"]
            .iter()
            .map(|p| (*p, "SKIP"))
            .collect();
    except.push(("missing-key", "SKIP"));
    except
}

/// An empty token taken as a key every client shares: the second payment under it is answered
/// with the first one's, a lost payment, judged for a token as for the draft's `""` (critical;
/// it was a WARN for the 201 alone).
#[test]
fn an_empty_token_shared_by_two_clients_fails_empty_key() {
    let mut except = token_skips();
    except.push(("empty-key", "FAIL"));
    let run = five_times("token_empty", &[], &token(), &except, 4);
    assert_says(
        &run.stdout,
        "empty-key  FAIL (critical)",
        "a lost payment is critical",
    );
    assert_says(
        &run.timeline("empty-key"),
        "the empty key was accepted (#",
        "the evidence names the two payments under it",
    );
}

/// `--key-required`: the keyless request that executes is a FAIL for a token carrier too, and
/// the header says the key is required.
#[test]
fn a_required_token_is_judged_as_required() {
    let mut except = token_skips();
    except.retain(|(p, _)| *p != "missing-key");
    except.extend([("missing-key", "FAIL"), ("empty-key", "FAIL")]);
    let args = [&token()[..], &["--key-required"]].concat();
    let run = expect("token_empty", &[], &args, &except, 4);
    assert_says(
        &run.stdout,
        "key: header X-Idempotency-Key, token, required",
        "the header line says the key is required",
    );
}

/// A keyless request that executes at once and is answered only after the client's timeout:
/// the count shows it executed, so the key is optional and missing-key SKIPs, as when the
/// answer comes in time. (Before, the missing answer made the probe judge "executes nothing"
/// against a key it had no reason to think required, and FAIL on the count.)
#[test]
fn a_lost_answer_does_not_make_an_optional_key_required() {
    let mut except = token_skips();
    except.push(("empty-key", "FAIL"));
    let run = five_times("token_empty", &["--slow-keyless"], &token(), &except, 4);
    assert_says(
        run.reason("missing-key"),
        "without a key executed (counter GET",
        "the SKIP says how the execution was seen",
    );
}

/// A store client whose offline queue is flushed after a reconnect backoff that grows with
/// every outage: after the first outage the race window is 20 ms wide and the retry lands in it
/// by chance; after a later one the queue drains only after the first request that reaches the
/// store again, so the retry lands in it however long the store-up hook took. store-outage
/// repeats the outage while the request during it was held open and executed once, so the
/// double payment is found in every run, and the evidence says which round caught it. (A
/// single outage found it in about one run of three.)
#[test]
fn a_store_client_racing_on_return_is_caught_every_run() {
    let (down, up) = (post_cmd("/store/down"), post_cmd("/store/up"));
    let mut args = full();
    args.extend(["--store-down-cmd", &down, "--store-up-cmd", &up]);
    let run = five_times(
        "store_reconnect",
        &[],
        &args,
        &[("store-outage", "FAIL")],
        4,
    );
    assert_says(
        &run.stdout,
        "store-outage  FAIL (critical)",
        "two executions for one key are a duplicated effect",
    );
    assert_says(
        &run.timeline("store-outage"),
        "is judged: 2 executions for its key",
        "the evidence says which round caught it",
    );
}

/// `--key-in-body` naming a member the body lacks puts it into its parent object, and the
/// header line says so; Square's layout then PASSes as when the body holds the member.
#[test]
fn a_body_key_the_body_lacks_is_put_into_it() {
    let args = [
        "-H",
        "Authorization: Bearer ta",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"source_id":"cnon:ok","amount_money":{"amount":5,"currency":"USD"},"note":"{{unique}}"}"#,
        "--key-in-body",
        "/idempotency_key",
        "--id-pointer",
        "/payment/id",
        "--count-url",
        "{base}/count",
        "--tenant-b-header",
        "Authorization: Bearer tb",
        "--hold-header",
        "X-Hold: {{hold}}",
        "--hold-release",
        "{base}/holds/{{hold}}/release",
        "--timeout",
        "3s",
    ];
    let except: Vec<(&str, &str)> = [
        "quoted-key",
        "escaped-key",
        "bare-token",
        "key-parameters",
        "malformed-key",
        "duplicate-header",
        "header-name-case",
    ]
    .iter()
    .map(|p| (*p, "SKIP"))
    .collect();
    let run = expect("square_body_key", &[], &args, &except, 0);
    assert_says(
        &run.stdout,
        "key: body /idempotency_key, token, put into the body",
        "the header line says the member is put into the body",
    );
}

/// `--key-shape uuid` against a correct API that takes any key: the one trial key outside the
/// shape is accepted, so the flag is wrong; the trials run as without it and win, the report
/// says both, and the table is the correct API's own.
#[test]
fn a_key_shape_the_trials_contradict_gives_way_to_them() {
    let args = [&full()[..], &["--key-shape", "uuid"]].concat();
    let run = expect("tenant_counter", &[], &args, &[], 0);
    assert_says(
        &run.stdout,
        "key shape: any, learnt from the trials: #",
        "what the trials learnt",
    );
    assert_says(
        &run.stdout,
        "(--key-shape uuid said otherwise, but #",
        "and what the flag said, with the exchange that contradicts it",
    );
    assert_says(&run.stdout, "the trials win", "which one the run went by");
}
