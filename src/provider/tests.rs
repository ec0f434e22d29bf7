//! Each profile played over real sockets: its charge, its replay, its answer to other
//! parameters under a used key, and its answer to a key in flight.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::ledger::Answered;
use super::profile::{self, BodyFormat, InProgress, Operation, Profile, PROFILES};
use super::script::{Script, Step};
use super::{FakeProvider, Settings};

/// A call as an API would make it to `p`'s `op`, with reference `r`, amount `amount` and key
/// `key` in the profile's carrier.
fn call(
    p: &Profile,
    op: Operation,
    r: &str,
    amount: i64,
    key: Option<&str>,
) -> (String, Vec<(String, String)>, Vec<u8>) {
    let e = p.endpoint(op);
    let value = format!("{}.{:02}", amount / 100, amount % 100);
    let mut body = match (p.name, op) {
        ("stripe", Operation::Charge) => format!("amount={amount}&currency=eur&confirm=true&payment_method=pm_card_visa&metadata[reference]={r}"),
        ("stripe", Operation::Payout) => format!("amount={amount}&currency=eur&metadata[reference]={r}"),
        ("adyen", Operation::Charge) => serde_json::json!({"merchantAccount":"IdemCheck","amount":{"value":amount,"currency":"EUR"},"reference":r,"paymentMethod":{"type":"scheme"}}).to_string(),
        ("adyen", Operation::Payout) => serde_json::json!({"amount":{"value":amount,"currency":"EUR"},"reference":r,"category":"bank"}).to_string(),
        ("square", Operation::Charge) => serde_json::json!({"idempotency_key":key.unwrap_or(""),"source_id":"cnon:card-nonce-ok","amount_money":{"amount":amount,"currency":"EUR"},"reference_id":r}).to_string(),
        ("square", Operation::Payout) => serde_json::json!({"idempotency_key":key.unwrap_or(""),"payment_id":r,"amount_money":{"amount":amount,"currency":"EUR"}}).to_string(),
        ("paypal", Operation::Charge) => serde_json::json!({"intent":"CAPTURE","purchase_units":[{"reference_id":r,"amount":{"currency_code":"EUR","value":value}}]}).to_string(),
        ("paypal", Operation::Payout) => serde_json::json!({"sender_batch_header":{"sender_batch_id":r},"items":[{"amount":{"value":value,"currency":"EUR"},"receiver":"payee@example.com","recipient_type":"EMAIL"}]}).to_string(),
        ("checkout", Operation::Charge) => serde_json::json!({"amount":amount,"currency":"EUR","reference":r,"source":{"type":"token","token":"tok_idemcheck"}}).to_string(),
        ("checkout", Operation::Payout) => serde_json::json!({"reference":r,"transfer_type":"commission","source":{"id":"ent_src","amount":amount},"destination":{"id":"ent_dst"}}).to_string(),
        ("gocardless", Operation::Charge) => serde_json::json!({"payments":{"amount":amount,"currency":"EUR","links":{"mandate":"MD000IDEM"},"metadata":{"reference":r}}}).to_string(),
        ("gocardless", Operation::Payout) => serde_json::json!({"refunds":{"amount":amount,"links":{"payment":r},"metadata":{"reference":r}}}).to_string(),
        _ => serde_json::json!({"amount":amount,"currency":"EUR","reference":r}).to_string(),
    };
    if p.key_in_body && key.is_none() {
        body = body.replace(r#""idempotency_key":"","#, "");
    }
    let mut headers = vec![(
        "content-type".to_string(),
        match p.body {
            BodyFormat::Form => "application/x-www-form-urlencoded",
            BodyFormat::Json => "application/json",
        }
        .to_string(),
    )];
    if let (Some(k), false) = (key, p.key_in_body) {
        let v = if p.key_sf_string {
            format!("\"{k}\"")
        } else {
            k.to_string()
        };
        headers.push((p.key_at.to_string(), v));
    }
    (e.path.to_string(), headers, body.into_bytes())
}

/// What came back: a status and body, or `None` when the connection closed without one.
async fn send(
    fake: &FakeProvider,
    (path, headers, body): (String, Vec<(String, String)>, Vec<u8>),
) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(fake.addr()).await.unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

fn start(p: &'static Profile) -> Arc<FakeProvider> {
    FakeProvider::bind("127.0.0.1:0", Settings::of(p)).unwrap()
}

fn reference(p: &Profile, op: Operation, body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.pointer(p.endpoint(op).ref_pointer)?
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn every_profile_charges_once_per_key_and_replays_or_refuses_as_documented() {
    for p in PROFILES {
        let fake = start(p);
        let token = format!("idem-check-test-{}", p.name);
        fake.arm(&token, Script::normal());
        let first = send(&fake, call(p, Operation::Charge, &token, 1250, Some("k1")))
            .await
            .unwrap();
        assert!((200..300).contains(&first.0), "{}: {first:?}", p.name);
        let id = reference(p, Operation::Charge, &first.1)
            .unwrap_or_else(|| panic!("{}: no ref in {}", p.name, first.1));
        let repeat = send(&fake, call(p, Operation::Charge, &token, 1250, Some("k1")))
            .await
            .unwrap();
        match p.name {
            "gocardless" => {
                assert_eq!(repeat.0, 409, "{}", p.name);
                assert!(repeat.1.contains(&id), "names the resource: {}", repeat.1);
            }
            _ => assert_eq!(
                (repeat.0, reference(p, Operation::Charge, &repeat.1)),
                (first.0, Some(id.clone())),
                "{}",
                p.name
            ),
        }
        let other = send(&fake, call(p, Operation::Charge, &token, 999, Some("k1")))
            .await
            .unwrap();
        match p.name {
            "stripe" | "square" => assert_eq!(other.0, 400, "{}", p.name),
            "adyen" | "generic" => assert_eq!(other.0, 422, "{}", p.name),
            "checkout" | "gocardless" => assert_eq!(other.0, 409, "{}", p.name),
            "paypal" => assert_eq!(reference(p, Operation::Charge, &other.1), Some(id.clone())),
            _ => unreachable!(),
        }
        let payout = send(&fake, call(p, Operation::Payout, &token, 1250, Some("k2")))
            .await
            .unwrap();
        assert!(
            (200..300).contains(&payout.0),
            "{} payout: {payout:?}",
            p.name
        );
        assert!(
            reference(p, Operation::Payout, &payout.1).is_some(),
            "{}: {}",
            p.name,
            payout.1
        );
        let charges = fake.charges(&token);
        assert_eq!(charges.len(), 2, "{}", p.name);
        assert_eq!(charges[0].key.as_deref(), Some("k1"));
        assert_eq!(charges[0].params.reference.as_deref(), Some(token.as_str()));
        assert_eq!(charges[1].operation, Operation::Payout);
        assert_eq!(fake.calls(&token).len(), 4);
    }
}

#[tokio::test]
async fn a_key_in_flight_gets_the_profiles_in_progress_answer_or_waits_for_the_first() {
    for p in PROFILES {
        let fake = start(p);
        let token = format!("idem-check-hold-{}", p.name);
        fake.arm(&token, Script::first(&[Step::HoldUntilReleased]));
        let held = tokio::spawn({
            let fake = fake.clone();
            let c = call(p, Operation::Charge, &token, 1250, Some("k"));
            async move { send(&fake, c).await }
        });
        assert!(
            fake.wait_for(&token, Duration::from_secs(5), |c| c.len() == 1)
                .await
        );
        let second = tokio::spawn({
            let fake = fake.clone();
            let c = call(p, Operation::Charge, &token, 1250, Some("k"));
            async move { send(&fake, c).await }
        });
        assert!(
            fake.wait_for(&token, Duration::from_secs(5), |c| c.len() == 2)
                .await
        );
        if let InProgress::Refuse(status, _) = p.in_progress {
            let answer = second.await.unwrap().unwrap();
            assert_eq!(answer.0, status, "{}", p.name);
            fake.release(&token);
            assert!((200..300).contains(&held.await.unwrap().unwrap().0));
        } else {
            fake.release(&token);
            let first = held.await.unwrap().unwrap();
            let answer = second.await.unwrap().unwrap();
            let expected = if p.name == "gocardless" { 409 } else { first.0 };
            assert_eq!(answer.0, expected, "{}", p.name);
        }
        assert_eq!(fake.charges(&token).len(), 1, "{}", p.name);
    }
}

#[tokio::test]
async fn scripted_steps_withhold_or_commit_as_they_say_and_unknown_paths_are_404() {
    let p = profile::find("generic").unwrap();
    let fake = start(p);
    let token = "idem-check-steps-1";
    fake.arm(
        token,
        Script::first(&[
            Step::Unavailable,
            Step::Throttled(1),
            Step::Reset,
            Step::CommitThenClose,
            Step::NormalThenForget,
        ]),
    );
    let c = || call(p, Operation::Charge, token, 1250, Some("k"));
    assert_eq!(send(&fake, c()).await.unwrap().0, 503);
    let throttled = send(&fake, c()).await.unwrap();
    assert_eq!(throttled.0, 429);
    assert_eq!(send(&fake, c()).await, None);
    assert_eq!(fake.charges(token).len(), 0, "nothing committed yet");
    assert_eq!(send(&fake, c()).await, None);
    assert_eq!(fake.charges(token).len(), 1, "committed, then closed");
    // The key is known: a replay, then forgotten, so the next call charges again.
    assert_eq!(send(&fake, c()).await.unwrap().0, 201);
    assert_eq!(send(&fake, c()).await.unwrap().0, 201);
    assert_eq!(fake.charges(token).len(), 2);
    let calls = fake.calls(token);
    assert!(matches!(calls[2].answered, Answered::Closed { .. }));
    assert_eq!(calls.iter().filter(|c| c.key() == Some("k")).count(), 6);
    let lost = send(
        &fake,
        (
            "/v1/unknown".into(),
            vec![],
            format!("{{\"reference\":\"{token}\"}}").into_bytes(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(lost.0, 404);
    assert!(lost.1.contains("/v1/unknown"), "{}", lost.1);
    let stray = send(&fake, call(p, Operation::Charge, "someone-else", 5, None))
        .await
        .unwrap();
    assert_eq!(stray.0, 201);
    assert_eq!(
        fake.all_calls()
            .iter()
            .filter(|c| c.token.is_none())
            .count(),
        1
    );
}

#[tokio::test]
async fn a_port_already_taken_is_a_bind_error() {
    let fake = start(profile::find("generic").unwrap());
    let again = FakeProvider::bind(&fake.addr().to_string(), Settings::of(fake.profile()));
    assert!(matches!(again, Err(super::ProviderError::Bind { .. })));
}

/// Calls with one new key arriving together: one charge, whatever the profile answers the
/// others (the key is looked up and claimed under one lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_with_one_new_key_at_once_charge_once() {
    for p in PROFILES {
        let fake = start(p);
        let token = format!("idem-check-together-{}", p.name);
        fake.arm(&token, Script::normal());
        let calls =
            (0..16).map(|_| send(&fake, call(p, Operation::Charge, &token, 1250, Some("k1"))));
        futures::future::join_all(calls).await;
        assert_eq!(fake.charges(&token).len(), 1, "{}", p.name);
    }
}
