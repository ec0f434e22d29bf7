//! The server also speaks HTTP/2 over cleartext with prior knowledge (h2c), on the same port as
//! HTTP/1.1, so the checker's single-packet burst has a local target.

use crate::common::{body, fresh_key, start_on, StoreKind, TestDb, TIMEOUT};

/// A payment over h2c executes once and its retry replays, as over HTTP/1.1.
#[tokio::test]
async fn h2c_prior_knowledge_requests_are_served() {
    let db = TestDb::new(StoreKind::Sqlite);
    let server = start_on(&db, |_| {}).await;
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(TIMEOUT)
        .build()
        .expect("client");
    let url = format!("http://{}/api/payments", server.addr);
    let key = fresh_key();
    let mut ids = Vec::new();
    for replayed in ["false", "true"] {
        let resp = client
            .post(&url)
            .header("Authorization", "Bearer token-a")
            .header("Idempotency-Key", &key)
            .header("Content-Type", "application/json")
            .body(body("h2c"))
            .send()
            .await
            .expect("h2c request");
        assert_eq!(resp.version(), reqwest::Version::HTTP_2);
        assert_eq!(resp.status(), 201);
        assert_eq!(
            resp.headers()["idempotency-replayed"].to_str().unwrap(),
            replayed
        );
        let text = resp.text().await.expect("body");
        ids.push(serde_json::from_str::<serde_json::Value>(&text).expect("json")["id"].clone());
    }
    assert_eq!(ids[0], ids[1]);
    assert_eq!(server.client().count("token-a").await, 1);
    server.stop().await;
}
