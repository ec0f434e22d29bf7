//! Which of a probe's recorded exchanges `reproduce` sends again, and how: the scenario read
//! from the exchanges themselves (a burst is the exchanges the race engine released; a lost
//! response is the exchange idem-check dropped and the retries with its key), never from the
//! probe's name, so any probe whose evidence holds one is replayed the same way.

use super::recorded::{RecordedExchange, RecordedProbe};
use crate::carrier::Place;
use crate::http::exchange::Header;
use crate::http::role::AT_PROVIDER;

/// What is sent again.
#[derive(Debug, Clone)]
pub enum Scenario {
    /// The first synchronised burst, sent again with a fresh key.
    Burst { members: Vec<RecordedExchange> },
    /// The request whose answer was dropped (with its hold), then its retries at the offsets
    /// they were sent at, with a fresh key.
    LostResponse {
        original: RecordedExchange,
        retries: Vec<RecordedExchange>,
    },
    /// One exchange, exactly as recorded (its key too).
    Single { exchange: RecordedExchange },
    /// A webhook check's deliveries (the exchanges that are not counter reads), in order, each
    /// signed again afresh as its `signing` says.
    Deliveries { members: Vec<RecordedExchange> },
}

/// Why a probe's exchanges offer nothing to send.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "the report has no exchange #{n} in {probe} (it has #1–#{last}); see its exchange table"
    )]
    NoExchange {
        probe: String,
        n: usize,
        last: usize,
    },
    #[error("{probe} recorded no exchange (it was {outcome}): nothing to reproduce")]
    Empty { probe: String, outcome: String },
    #[error("{probe} sent no burst and dropped no answer; send one of its exchanges again with --exchange N ({listing})")]
    NoScenario { probe: String, listing: String },
}

/// The scenario of `probe`, or its exchange `n` alone; `key` is where the key that makes two
/// requests the same logical request travels.
pub fn plan(
    probe: &RecordedProbe,
    exchange: Option<usize>,
    key: &Place,
) -> Result<Scenario, PlanError> {
    // Calls the API made to the fake provider are evidence, not requests to send again.
    let exchanges: Vec<RecordedExchange> = probe
        .exchanges
        .iter()
        .filter(|e| !e.role.ends_with(AT_PROVIDER))
        .cloned()
        .collect();
    let exchanges = &exchanges;
    if let Some(n) = exchange {
        return exchanges
            .iter()
            .find(|e| e.n == n)
            .map(|e| Scenario::Single {
                exchange: e.clone(),
            })
            .ok_or_else(|| PlanError::NoExchange {
                probe: probe.id.clone(),
                n,
                last: exchanges.iter().map(|e| e.n).max().unwrap_or(0),
            });
    }
    if exchanges.is_empty() {
        return Err(PlanError::Empty {
            probe: probe.id.clone(),
            outcome: probe.outcome.clone(),
        });
    }
    // Signed deliveries are a webhook check's: all of them are sent again, in order; its
    // counter reads are GETs, and no delivery is one.
    if exchanges.iter().any(|e| e.signing.is_some()) {
        return Ok(Scenario::Deliveries {
            members: exchanges
                .iter()
                .filter(|e| e.request.method != "GET")
                .cloned()
                .collect(),
        });
    }
    if let Some(original) = exchanges.iter().find(|e| e.dropped()) {
        let same = original.request_key(key);
        let retries = exchanges
            .iter()
            .filter(|e| e.n > original.n && e.request_key(key) == same && !e.dropped())
            .cloned()
            .collect();
        return Ok(Scenario::LostResponse {
            original: original.clone(),
            retries,
        });
    }
    if let Some(first) = exchanges.iter().position(|e| e.release_us.is_some()) {
        let same = exchanges[first].request_key(key);
        let members = exchanges[first..]
            .iter()
            .take_while(|e| e.release_us.is_some() && e.request_key(key) == same)
            .cloned()
            .collect();
        return Ok(Scenario::Burst { members });
    }
    Err(PlanError::NoScenario {
        probe: probe.id.clone(),
        listing: exchanges
            .iter()
            .take(8)
            .map(|e| format!("#{} {}", e.n, e.role))
            .chain((exchanges.len() > 8).then(|| "…".to_string()))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

impl RecordedExchange {
    /// What makes two requests the same logical request: method, URL and key. The hold header
    /// is left out (each held request names a fresh hold).
    fn request_key(&self, key: &Place) -> (&str, &str, Vec<Vec<u8>>) {
        let headers: Vec<Header> = self
            .request
            .headers
            .iter()
            .map(|h| Header::new(h.name.clone(), h.value.0.clone()))
            .collect();
        (
            &self.request.method,
            &self.request.url,
            key.values_in(&headers, &self.request.body.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An exchange of a report: `key` in `Idempotency-Key`, answered `status` (none: dropped).
    fn ex(
        n: usize,
        method: &str,
        key: Option<&str>,
        status: Option<u16>,
        burst: bool,
    ) -> serde_json::Value {
        let headers: Vec<_> = key
            .map(|k| json!({"name": "Idempotency-Key", "value": k}))
            .into_iter()
            .collect();
        let mut e = json!({
            "n": n, "role": format!("role {n}"), "start_ms": n as f64, "duration_ms": 1.0,
            "request": {"method": method, "url": "http://127.0.0.1:1/pay", "headers": headers, "body": ""},
        });
        match status {
            Some(s) => e["response"] = json!({"status": s}),
            None => {
                e["error"] = json!(crate::http::HttpError::Dropped.to_string());
                e["error_kind"] = json!("dropped");
            }
        }
        if burst {
            e["release_us"] = json!(10.0 * n as f64);
        }
        e
    }

    fn probe(exchanges: Vec<serde_json::Value>) -> RecordedProbe {
        serde_json::from_value(json!({"id": "p", "outcome": "FAIL", "exchanges": exchanges}))
            .unwrap()
    }

    fn numbers(list: &[RecordedExchange]) -> Vec<usize> {
        list.iter().map(|e| e.n).collect()
    }

    #[test]
    fn the_first_burst_of_one_key_is_the_scenario() {
        let p = probe(vec![
            ex(1, "GET", None, Some(200), false),
            ex(2, "POST", Some("\"a\""), Some(201), true),
            ex(3, "POST", Some("\"a\""), Some(201), true),
            ex(4, "POST", Some("\"b\""), Some(201), true),
            ex(5, "POST", Some("\"a\""), Some(201), false),
        ]);
        match plan(&p, None, &Place::Header("idempotency-key".into())).unwrap() {
            Scenario::Burst { members } => assert_eq!(numbers(&members), [2, 3]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dropped_answer_is_replayed_with_the_later_requests_of_its_key() {
        let p = probe(vec![
            ex(1, "GET", None, Some(200), false),
            ex(2, "POST", Some("\"a\""), None, false),
            ex(3, "POST", Some("\"b\""), Some(201), false),
            ex(4, "POST", Some("\"a\""), Some(409), false),
            ex(5, "POST", Some("\"a\""), Some(201), false),
        ]);
        match plan(&p, None, &Place::ietf()).unwrap() {
            Scenario::LostResponse { original, retries } => {
                assert_eq!(original.n, 2);
                assert_eq!(numbers(&retries), [4, 5]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_exchange_is_chosen_by_number_and_an_unknown_one_is_named() {
        let p = probe(vec![
            ex(1, "POST", Some("\"a\""), Some(201), false),
            ex(2, "POST", Some("\"a\""), Some(201), false),
        ]);
        assert!(matches!(
            plan(&p, Some(2), &Place::ietf()),
            Ok(Scenario::Single { exchange }) if exchange.n == 2
        ));
        assert_eq!(
            plan(&p, Some(7), &Place::ietf()).unwrap_err(),
            PlanError::NoExchange {
                probe: "p".into(),
                n: 7,
                last: 2
            }
        );
        let err = plan(&p, None, &Place::ietf()).unwrap_err().to_string();
        assert!(err.contains("--exchange N (#1 role 1, #2 role 2)"), "{err}");
    }
}
