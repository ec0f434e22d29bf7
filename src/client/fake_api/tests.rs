use super::*;

async fn post(base: &str, key: Option<&str>, body: &str) -> std::io::Result<String> {
    match key {
        Some(k) => post_as(base, k, body, "application/json").await,
        None => send(base, "", body, "application/json").await,
    }
}

async fn post_as(base: &str, key: &str, body: &str, ct: &str) -> std::io::Result<String> {
    send(base, &format!("Idempotency-Key: {key}\r\n"), body, ct).await
}

async fn send(base: &str, key: &str, body: &str, ct: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!(
        "POST /api/payments HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer t\r\n{key}\
         Content-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

const BODY: &str = r#"{"amountCents":1250,"currency":"EUR","reference":"r1"}"#;
const LOCAL: &str = "127.0.0.1:0";

/// The built-in payments operation with a bearer token and problem+json errors.
pub(crate) fn payments() -> Arc<ApiConfig> {
    Arc::new(ApiConfig {
        operations: vec![Operation::payments()],
        carrier: KeyCarrier::ietf_header(),
        token: "t".into(),
        auth: Auth::Bearer,
        errors: ErrorBody::Problem,
        conflict_on_replay: false,
    })
}

/// A fake payments API on an ephemeral port, acting out `behaviour`.
async fn start(behaviour: Behaviour) -> FakeApi {
    FakeApi::start(LOCAL.parse().unwrap(), behaviour, payments())
        .await
        .unwrap()
}

/// Posts [`BODY`] with `key` and asserts that it created the payment.
async fn assert_created(base: &str, key: &str) {
    let r = post(base, Some(key), BODY).await.unwrap();
    assert!(r.starts_with("HTTP/1.1 201"), "{r}");
}

#[tokio::test]
async fn lost_response_commits_then_closes_without_a_byte_then_replays() {
    let api = start(Behaviour::DropAfterCommit).await;
    let base = api.base_url();
    let first = post(&base, Some("\"k1\""), BODY).await.unwrap();
    assert_eq!(
        first, "",
        "the connection must close without any response bytes"
    );
    let retry = post(&base, Some("\"k1\""), BODY).await.unwrap();
    assert!(retry.starts_with("HTTP/1.1 201"), "{retry}");
    assert!(retry
        .to_ascii_lowercase()
        .contains("idempotent-replayed: true"));
    let rec = api.finish().await;
    assert_eq!(rec.payments, 1);
    assert_eq!(rec.attempts.len(), 2);
    assert!(rec.attempts[0].exchange.response().is_none());
    assert_eq!(rec.attempts[1].key.as_ref().unwrap().value, "k1");
}

#[tokio::test]
async fn both_key_forms_name_the_same_key_and_a_changed_payload_gets_422() {
    let api = start(Behaviour::Normal).await;
    let base = api.base_url();
    assert_created(&base, "k2").await;
    let quoted = post(&base, Some("\"k2\""), BODY).await.unwrap();
    assert!(quoted.contains("idempotent-replayed"), "{quoted}");
    let other = BODY.replace("r1", "r2");
    assert!(post(&base, Some("k2"), &other)
        .await
        .unwrap()
        .starts_with("HTTP/1.1 422"));
    let rec = api.finish().await;
    assert_eq!(rec.payments, 1);
    assert!(!rec.attempts[0].key.as_ref().unwrap().sf_string);
    assert!(rec.attempts[1].key.as_ref().unwrap().sf_string);
}

#[tokio::test]
async fn a_form_encoded_payment_is_the_same_payload_as_its_json() {
    let api = start(Behaviour::Normal).await;
    let base = api.base_url();
    assert_created(&base, "k").await;
    let form = "reference=r1&currency=EUR&amountCents=1250";
    let r = post_as(&base, "k", form, "application/x-www-form-urlencoded")
        .await
        .unwrap();
    assert!(r.contains("idempotent-replayed"), "{r}");
    assert_eq!(api.finish().await.payments, 1);
}

/// A GET on the read operation, as an SDK fetching what it created.
async fn get(base: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer t\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

#[tokio::test]
async fn a_conflict_names_the_created_resource_which_the_read_operation_serves() {
    let config = ApiConfig {
        conflict_on_replay: true,
        ..(*payments()).clone()
    };
    let api = FakeApi::start(LOCAL.parse().unwrap(), Behaviour::Normal, Arc::new(config))
        .await
        .unwrap();
    let base = api.base_url();
    let created = post(&base, Some("\"k\""), BODY).await.unwrap();
    let conflict = post(&base, Some("\"k\""), BODY).await.unwrap();
    assert!(conflict.starts_with("HTTP/1.1 409"), "{conflict}");
    let body =
        |r: &str| -> Value { serde_json::from_str(r.split("\r\n\r\n").nth(1).unwrap()).unwrap() };
    let id = body(&conflict)["resource"].as_str().unwrap().to_string();
    assert_eq!(body(&created)["id"], id.as_str());
    let read = get(&base, &format!("/api/payments/{id}")).await.unwrap();
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    assert_eq!(body(&read), body(&created));
    let missing = get(&base, "/api/payments/pay_9999").await.unwrap();
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let rec = api.finish().await;
    assert_eq!(rec.payments, 1);
    assert!(rec.attempts[2].read && !rec.attempts[2].operation);
    assert!(rec.attempts[2].setup_refusal.is_none());
}

#[tokio::test]
async fn injected_refusals_commit_nothing_and_carry_retry_after() {
    for (behaviour, status, retry_after) in [
        (Behaviour::Transient(503, Wait::Seconds(2)), "503", true),
        (Behaviour::Transient(409, Wait::Seconds(2)), "409", true),
        (Behaviour::Mismatch, "422", false),
        (Behaviour::Invalid, "400", false),
    ] {
        let api = start(behaviour).await;
        let r = post(&api.base_url(), Some("\"k\""), BODY).await.unwrap();
        assert!(r.starts_with(&format!("HTTP/1.1 {status}")), "{r}");
        assert_eq!(
            r.to_ascii_lowercase().contains("retry-after: 2"),
            retry_after
        );
        assert_eq!(api.finish().await.payments, 0);
    }
}
