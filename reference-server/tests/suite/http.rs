//! The HTTP contract of the correct server, over real HTTP on 127.0.0.1:0, in-process.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::common::{
    body, fresh_key, hold_name, start_on, Req, StoreKind, TestDb, HOLD_HEADER, TIMEOUT,
};
use idem_reference_server::{Clock, ManualClock};

const A: &str = "token-a";
const B: &str = "token-b";

/// A first request executes (201, Location, replay marker false, expiry header); a retry gets
/// the same status, headers and bytes with `Idempotency-Replayed: true`; nothing executes twice.
async fn first_request_executes_and_retries_replay_byte_identically(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let req = Req::payment(A, &fresh_key(), &body("first"));

    let first = client.send(&req).await;
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.header("idempotency-replayed"), Some("false"));
    let id = first.id();
    assert!(id.starts_with("pay_") && id.len() == 36, "{id}");
    assert_eq!(
        first.header("location"),
        Some(format!("/api/payments/{id}").as_str())
    );
    let expires = first.header("idempotency-key-expires-at").expect("expiry");
    assert!(humantime::parse_rfc3339(expires).is_ok(), "{expires}");
    let created = first.json();
    assert_eq!(created["amountCents"], 1250);
    assert_eq!(created["currency"], "EUR");
    assert_eq!(created["reference"], "first");
    assert!(created["createdAt"].is_string());

    for _ in 0..3 {
        let again = client.send(&req).await;
        assert_eq!(again.status, 201);
        assert_eq!(again.body, first.body);
        assert_eq!(again.header("content-type"), first.header("content-type"));
        assert_eq!(again.header("location"), first.header("location"));
        assert_eq!(again.header("idempotency-replayed"), Some("true"));
        assert_eq!(again.header("idempotency-key-expires-at"), Some(expires));
    }
    assert_eq!(client.count(A).await, 1);

    let shown = client
        .send(&Req::get(&format!("/api/payments/{id}")).token(A))
        .await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body, first.body);
    server.stop().await;
}

/// Payloads are normalised before fingerprinting: `usd`/`USD`, spacing and field order are the
/// same request.
async fn normalised_payloads_are_the_same_request(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let key = fresh_key();
    let first = client
        .send(&Req::payment(
            A,
            &key,
            r#"{"amountCents":5,"currency":"usd","reference":" norm "}"#,
        ))
        .await;
    assert_eq!(first.status, 201);
    let again = client
        .send(&Req::payment(
            A,
            &key,
            r#"{ "reference":"norm", "currency":" USD", "amountCents":5 }"#,
        ))
        .await;
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// A missing key is 400 problem+json with Link describedby, and executes nothing.
async fn missing_key_is_rejected_without_effect(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let resp = client
        .send(&Req::post("/api/payments").token(A).json(&body("nokey")))
        .await;
    resp.assert_idempotency_problem(400);
    assert!(resp.json()["type"]
        .as_str()
        .unwrap_or_default()
        .ends_with("#key-required"));
    assert_eq!(client.count(A).await, 0);
    server.stop().await;
}

/// Every malformed key is a 400 (never a 5xx) and executes nothing: tokens, integers,
/// booleans, byte sequences, inner lists, unterminated strings, bad escapes, non-ASCII,
/// control characters, the empty string, an oversized string and two header lines.
async fn malformed_keys_are_400_and_never_execute(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let long = format!("\"{}\"", "k".repeat(256));
    let cases: Vec<Vec<u8>> = vec![
        b"bare-token".to_vec(),
        b"42".to_vec(),
        b"?1".to_vec(),
        b":YWJj:".to_vec(),
        br#"("a" "b")"#.to_vec(),
        br#""unterminated"#.to_vec(),
        br#""bad\escape""#.to_vec(),
        "\"caf\u{e9}\"".as_bytes().to_vec(),
        b"\"tab\there\"".to_vec(),
        b"\"ctl\x01\"".to_vec(),
        b"\"\"".to_vec(),
        long.into_bytes(),
        br#""a", "b""#.to_vec(),
    ];
    for (i, raw) in cases.iter().enumerate() {
        let req = Req::post("/api/payments")
            .token(A)
            .header("Idempotency-Key", raw)
            .json(&body(&format!("malformed-{i}")));
        let resp = client.send(&req).await;
        assert_eq!(
            resp.status,
            400,
            "{raw:?} → {} {}",
            resp.status,
            resp.text()
        );
        if resp.header("content-type") == Some("application/problem+json") {
            resp.assert_idempotency_problem(400);
        }
    }
    let two_lines = Req::post("/api/payments")
        .token(A)
        .key(&fresh_key())
        .key(&fresh_key())
        .json(&body("two-lines"));
    client
        .send(&two_lines)
        .await
        .assert_idempotency_problem(400);
    assert_eq!(client.count(A).await, 0);
    server.stop().await;
}

/// A String holding a comma, an escaped quote, an escaped backslash and a space is a valid key
/// and replays; parameters are not part of the key; a 255-character key is accepted.
async fn escaped_and_parameterised_keys_are_the_same_key(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let escaped = r#""a, \"b\" \\c d""#;
    let first = client.send(&Req::payment(A, escaped, &body("esc"))).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let again = client.send(&Req::payment(A, escaped, &body("esc"))).await;
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.body, first.body);

    let uuid = uuid::Uuid::new_v4();
    let with_params = client
        .send(&Req::payment(
            A,
            &format!("\"{uuid}\";v=1"),
            &body("params"),
        ))
        .await;
    assert_eq!(with_params.status, 201);
    let without = client
        .send(&Req::payment(A, &format!("\"{uuid}\""), &body("params")))
        .await;
    assert_eq!(without.header("idempotency-replayed"), Some("true"));
    assert_eq!(without.body, with_params.body);

    let max = format!("\"{}\"", "k".repeat(255));
    assert_eq!(
        client
            .send(&Req::payment(A, &max, &body("max")))
            .await
            .status,
        201
    );
    assert_eq!(client.count(A).await, 3);
    server.stop().await;
}

/// Keys are case-sensitive and never deduplicated by payload: two keys, two executions.
async fn distinct_keys_are_independent(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let upper = client
        .send(&Req::payment(A, "\"KEY-x\"", &body("same")))
        .await;
    let lower = client
        .send(&Req::payment(A, "\"key-x\"", &body("same")))
        .await;
    let other = client
        .send(&Req::payment(A, &fresh_key(), &body("same")))
        .await;
    assert_eq!((upper.status, lower.status, other.status), (201, 201, 201));
    assert_ne!(upper.id(), lower.id());
    assert_ne!(lower.id(), other.id());
    assert_eq!(client.count(A).await, 3);
    server.stop().await;
}

/// The same key with another payload is 422 problem+json with Link, executes nothing, and
/// leaves the record intact: the original still replays.
async fn payload_mismatch_is_422_and_does_not_poison_the_key(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let key = fresh_key();
    let first = client.send(&Req::payment(A, &key, &body("orig"))).await;
    assert_eq!(first.status, 201);
    let other = client.send(&Req::payment(A, &key, &body("other"))).await;
    other.assert_idempotency_problem(422);
    let again = client.send(&Req::payment(A, &key, &body("orig"))).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// While the owner is held in flight, duplicates get 409 problem+json with `Retry-After: 1`
/// and Link, and a loser does not unlock the key; afterwards a retry replays the owner's result.
async fn duplicates_while_in_flight_get_409_with_retry_after(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |c| c.test_hooks = true).await;
    let client = server.client();
    let key = fresh_key();
    let req = Req::payment(A, &key, &body("held"));
    let owner = client.send_held(&req).await;
    for _ in 0..2 {
        let dup = client.send(&req).await;
        dup.assert_idempotency_problem(409);
        assert_eq!(dup.header("retry-after"), Some("1"));
    }
    let owner = owner.release().await;
    assert_eq!(owner.status, 201);
    let after = client.send(&req).await;
    assert_eq!(after.body, owner.body);
    assert_eq!(after.header("idempotency-replayed"), Some("true"));
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// An owner held longer than its lease keeps its claim because it renews the lease (heartbeat):
/// duplicates after the first lease period still get 409, and only one payment exists.
///
/// The server's clock is the test's: twice it jumps two leases ahead, so the lease the owner
/// last wrote has run out, and a duplicate is sent once a heartbeat has renewed it from the new
/// time (the stored `lease_until` says so). Without heartbeats that duplicate would take over.
async fn heartbeats_keep_a_slow_owner_s_claim(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = Arc::new(ManualClock::starting_now());
    let lease = Duration::from_millis(300);
    let server = start_on(&db, |c| {
        c.test_hooks = true;
        c.lease = lease;
        c.clock = clock.clone();
    })
    .await;
    let client = server.client();
    let req = Req::payment(A, &fresh_key(), &body("slow"));
    let owner = client.send_held(&req).await;
    for _ in 0..2 {
        clock.advance(lease * 2);
        let now = clock.now().duration_since(UNIX_EPOCH).unwrap().as_millis();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let rows = db.query("SELECT lease_until FROM idempotency_records");
            let lease_until: u128 = rows[0].parse().expect("lease_until");
            if lease_until > now {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no heartbeat renewed the lease"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(client.send(&req).await.status, 409);
    }
    assert_eq!(owner.release().await.status, 201);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// Tenant B using tenant A's key executes independently and never sees A's body; with another
/// payload it is not told the key exists (no 422). B cannot read A's payment.
async fn keys_are_scoped_to_the_tenant(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let key = fresh_key();
    let a = client.send(&Req::payment(A, &key, &body("tenant"))).await;
    let b = client.send(&Req::payment(B, &key, &body("tenant"))).await;
    assert_eq!((a.status, b.status), (201, 201));
    assert_eq!(b.header("idempotency-replayed"), Some("false"));
    assert_ne!(a.id(), b.id());
    let key2 = fresh_key();
    assert_eq!(
        client
            .send(&Req::payment(A, &key2, &body("x")))
            .await
            .status,
        201
    );
    assert_eq!(
        client
            .send(&Req::payment(B, &key2, &body("y")))
            .await
            .status,
        201
    );
    let peek = client
        .send(&Req::get(&format!("/api/payments/{}", a.id())).token(B))
        .await;
    peek.assert_problem(404);
    assert_eq!(client.count(A).await, 2);
    assert_eq!(client.count(B).await, 2);
    server.stop().await;
}

/// The same key on payouts is an independent operation (scope includes the operation).
async fn keys_are_scoped_to_the_operation(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let key = fresh_key();
    let payment = client.send(&Req::payment(A, &key, &body("op"))).await;
    let payout = client.send(&Req::payout(A, &key, &body("op"))).await;
    assert_eq!((payment.status, payout.status), (201, 201));
    assert!(payout.id().starts_with("po_"));
    assert_eq!(
        payout.header("location"),
        Some(format!("/api/payouts/{}", payout.id()).as_str())
    );
    assert_eq!(client.count(A).await, 1, "payouts are not payments");
    server.stop().await;
}

/// Missing or unknown credentials are 401 problem+json; a client-named tenant header changes
/// nothing.
async fn authentication_comes_from_the_bearer_token_only(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let anonymous = Req::post("/api/payments")
        .key(&fresh_key())
        .json(&body("anon"));
    client.send(&anonymous).await.assert_problem(401);
    let wrong = anonymous.clone().token("nope");
    client.send(&wrong).await.assert_problem(401);
    client
        .send(&Req::get("/api/payments/count"))
        .await
        .assert_problem(401);
    let spoof = Req::payment(A, &fresh_key(), &body("spoof")).header("X-Tenant", "tenant-b");
    assert_eq!(client.send(&spoof).await.status, 201);
    assert_eq!((client.count(A).await, client.count(B).await), (1, 0));
    server.stop().await;
}

/// Invalid payloads are 400 problem+json and do not claim the key: the valid request that
/// follows with the same key executes. Bodies over 64 KiB are 413.
async fn invalid_requests_are_rejected_before_the_key_is_claimed(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let key = fresh_key();
    let invalid = [
        Req::payment(
            A,
            &key,
            r#"{"amountCents":-1,"currency":"EUR","reference":"r"}"#,
        ),
        Req::payment(A, &key, "{not json"),
        Req::post("/api/payments")
            .token(A)
            .key(&key)
            .header("Content-Type", "text/plain")
            .body(body("r")),
    ];
    for req in &invalid {
        client.send(req).await.assert_problem(400);
    }
    let big = Req::post("/api/payments")
        .token(A)
        .key(&key)
        .header("Content-Type", "application/json")
        .body(vec![b' '; 64 * 1024 + 1]);
    client.send(&big).await.assert_problem(413);
    let valid = client.send(&Req::payment(A, &key, &body("valid"))).await;
    assert_eq!(valid.status, 201);
    assert_eq!(valid.header("idempotency-replayed"), Some("false"));
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// A failed execution (X-Test-Crash) is a 500 problem that releases the claim: the retry
/// executes at once, exactly once.
async fn a_crashed_execution_releases_the_claim(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |c| c.test_hooks = true).await;
    let client = server.client();
    let req = Req::payment(A, &fresh_key(), &body("crash"));
    client
        .send(&req.clone().header("X-Test-Crash", "1"))
        .await
        .assert_problem(500);
    assert_eq!(client.count(A).await, 0);
    let retry = client.send(&req).await;
    assert_eq!(retry.status, 201);
    assert_eq!(retry.header("idempotency-replayed"), Some("false"));
    assert_eq!(client.send(&req).await.body, retry.body);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// Without --test-hooks the test headers are ignored; marker headers a client might spoof
/// (`Idempotency-Replayed: true`) are ignored too.
async fn test_and_marker_headers_are_ignored_by_default(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    // Honoured, the delay and the hold would each keep the request 10 s.
    let req = Req::payment(A, &fresh_key(), &body("hooks"))
        .header("X-Test-Crash", "1")
        .header("X-Test-Delay-Ms", "10000")
        .header(HOLD_HEADER, hold_name())
        .header("Idempotency-Replayed", "true");
    let resp = tokio::time::timeout(Duration::from_secs(5), client.send(&req))
        .await
        .expect("the delay and hold headers must be ignored");
    assert_eq!(resp.status, 201);
    assert_eq!(client.send(&req).await.body, resp.body);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// A client that hangs up while its request is held does not cancel the work: the payment and
/// its record commit, and the retry replays it.
async fn a_lost_response_is_replayed_not_re_executed(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |c| c.test_hooks = true).await;
    let client = server.client();
    let req = Req::payment(A, &fresh_key(), &body("lost"));
    let hold = client.send_held_and_hang_up(&req).await;
    client.release(&hold).await;
    let retry = client.send_until(&req, |r| r.status != 409).await;
    assert_eq!(retry.status, 201);
    assert_eq!(retry.header("idempotency-replayed"), Some("true"));
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
}

/// `run()` closes the database before returning, and records survive the restart on the same
/// database: the retry replays byte-identically.
async fn completed_keys_survive_a_restart(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let req = Req::payment(A, &fresh_key(), &body("restart"));
    let first = server.client().send(&req).await;
    assert_eq!(first.status, 201);
    server.stop().await;
    db.assert_closed();
    let server = start_on(&db, |_| {}).await;
    let again = server.client().send(&req).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(server.client().count(A).await, 1);
    server.stop().await;
}

/// Two server instances on one database (two replicas) execute a key once between them: the
/// claim is a database transaction, not an in-process lock.
///
/// All eight duplicates carry one hold name: whichever claims the key waits in it, and it is
/// released only once the other seven were answered, so none of them can come after the
/// owner finished (and get a replay). A second claimer would wait in the hold too: then the
/// seven never arrive, the hold is released at the deadline, and two 201s fail the test.
async fn two_instances_on_one_database_execute_once(kind: StoreKind) {
    let db = TestDb::new(kind);
    let one = start_on(&db, |c| c.test_hooks = true).await;
    let two = start_on(&db, |c| c.test_hooks = true).await;
    let hold = hold_name();
    let req = Req::payment(A, &fresh_key(), &body("replicas")).header(HOLD_HEADER, &hold);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let client = if i % 2 == 0 {
            one.client()
        } else {
            two.client()
        };
        let req = req.clone();
        tasks.push(tokio::spawn(async move { client.send(&req).await }));
    }
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while tasks.iter().filter(|t| t.is_finished()).count() < 7
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    one.client().release(&hold).await;
    let mut created = 0;
    for task in tasks {
        let resp = task.await.expect("task");
        assert!(matches!(resp.status, 201 | 409), "{}", resp.status);
        created += usize::from(resp.status == 201);
    }
    assert_eq!(created, 1);
    let replay_one = one.client().send(&req).await;
    let replay_two = two.client().send(&req).await;
    assert_eq!(replay_one.body, replay_two.body);
    assert_eq!(one.client().count(A).await, 1);
    one.stop().await;
    two.stop().await;
}

/// Unknown routes are 404 problem+json; a wrong method is 405; health is 200.
async fn routing_errors_are_problems(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    client.send(&Req::get("/nope")).await.assert_problem(404);
    client
        .send(&Req::get("/api/payments").token(A))
        .await
        .assert_problem(405);
    assert_eq!(client.send(&Req::get("/healthz")).await.status, 200);
    server.stop().await;
}

/// With the store-outage test hook down, a keyed request is 503 problem+json with Retry-After
/// and executes nothing; after `up` the same key executes once. Without `--test-hooks` the
/// hook's routes do not exist.
async fn a_store_outage_refuses_keyed_requests(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |c| c.test_hooks = true).await;
    let client = server.client();
    let hook = |state: &str| Req::post(&format!("/test-hooks/store/{state}"));
    assert_eq!(client.send(&hook("down")).await.status, 200);
    let req = Req::payment(A, &fresh_key(), &body("outage"));
    let refused = client.send(&req).await;
    refused.assert_problem(503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(
        client.count(A).await,
        0,
        "nothing executed during the outage"
    );
    assert_eq!(client.send(&hook("up")).await.status, 200);
    assert_eq!(client.send(&req).await.status, 201);
    assert_eq!(client.count(A).await, 1);
    server.stop().await;
    let plain = start_on(&db, |_| {}).await;
    plain.client().send(&hook("down")).await.assert_problem(404);
    plain.stop().await;
}

on_both_stores!(
    #[tokio::test]
    a_store_outage_refuses_keyed_requests,
    first_request_executes_and_retries_replay_byte_identically,
    normalised_payloads_are_the_same_request,
    missing_key_is_rejected_without_effect,
    malformed_keys_are_400_and_never_execute,
    escaped_and_parameterised_keys_are_the_same_key,
    distinct_keys_are_independent,
    payload_mismatch_is_422_and_does_not_poison_the_key,
    duplicates_while_in_flight_get_409_with_retry_after,
    heartbeats_keep_a_slow_owner_s_claim,
    keys_are_scoped_to_the_tenant,
    keys_are_scoped_to_the_operation,
    authentication_comes_from_the_bearer_token_only,
    invalid_requests_are_rejected_before_the_key_is_claimed,
    a_crashed_execution_releases_the_claim,
    test_and_marker_headers_are_ignored_by_default,
    a_lost_response_is_replayed_not_re_executed,
    completed_keys_survive_a_restart,
    two_instances_on_one_database_execute_once,
    routing_errors_are_problems,
);

/// Under `--key-in-body /idempotency_key` the key is the body's field, an opaque token: the
/// same key and payload replay byte for byte, another payload is 422, a missing or non-string
/// field is 400 without effect, and the key header means nothing. The field is not part of the
/// payload (the strict payload schema would refuse it otherwise).
#[tokio::test]
async fn a_key_in_the_body_is_the_key() {
    let db = TestDb::new(StoreKind::Sqlite);
    let server = start_on(&db, |c| c.key_in_body = Some("/idempotency_key".into())).await;
    let client = server.client();
    let keyed = |reference: &str, key: &str| {
        let mut payload: serde_json::Value = serde_json::from_str(&body(reference)).unwrap();
        payload["idempotency_key"] = serde_json::json!(key);
        Req::post("/api/payments")
            .token(A)
            .json(&payload.to_string())
    };
    let first = client.send(&keyed("body-a", "\"k-1\"")).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let again = client.send(&keyed("body-a", "\"k-1\"")).await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    let other = client.send(&keyed("body-b", "\"k-1\"")).await;
    assert_eq!(other.status, 422, "{}", other.text());

    let missing = client
        .send(&Req::payment(A, "\"k-2\"", &body("body-c")))
        .await;
    assert_eq!(
        missing.status,
        400,
        "the header is not the key: {}",
        missing.text()
    );
    assert!(
        missing.text().contains("/idempotency_key"),
        "{}",
        missing.text()
    );
    let mut number: serde_json::Value = serde_json::from_str(&body("body-d")).unwrap();
    number["idempotency_key"] = serde_json::json!(7);
    let number = Req::post("/api/payments")
        .token(A)
        .json(&number.to_string());
    assert_eq!(client.send(&number).await.status, 400);
    let control = client.send(&keyed("body-e", "k\u{1}")).await;
    assert_eq!(control.status, 400, "{}", control.text());
    assert_eq!(client.count(A).await, 1);

    let doc = client.send(&Req::get("/openapi.json")).await.json();
    let schema = &doc["components"]["schemas"]["PaymentRequest"];
    assert_eq!(schema["properties"]["idempotency_key"]["type"], "string");
    assert!(doc["components"]["parameters"]["IdempotencyKey"].is_null());
    server.stop().await;
}
