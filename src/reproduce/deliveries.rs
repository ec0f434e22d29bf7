//! A webhook check's deliveries sent again: each signed afresh, from the secrets the reader
//! exports, as the report's `signing` says ([`Signing`]): the same keys (the forgeries' wrong
//! key too, so a forgery stays a forgery), the same distance from this machine's clock (a stale
//! timestamp stays stale), by the scheme's own signer ([`Scheme::headers`]).

use super::{status, RecordedExchange, Replayer, RestoreError};
use crate::http::Request;
use crate::report::replay_lines::{Signing, SigningKey};
use crate::webhook::scheme::{EventMeta, Scheme};
use crate::webhook::sender::Sender;

/// A delivery as it goes out again.
pub(super) enum Resent {
    /// Signed afresh, or as recorded when it carries no signature, with words saying which.
    Ready(Request, String),
    /// Its signatures are over other bytes than those sent (a tampered body): no key makes
    /// them again, so it is not sent.
    Unsignable,
}

impl Replayer {
    /// `ex` ready to be sent again: its signature (and signed timestamp) made afresh when it
    /// was signed, as recorded otherwise.
    pub(super) fn resent(&self, ex: &RecordedExchange) -> Result<Resent, RestoreError> {
        let Some(signing) = &ex.signing else {
            return Ok(Resent::Ready(self.restore(ex)?, "as recorded".into()));
        };
        if signing.keys.is_empty() {
            return Ok(Resent::Unsignable);
        }
        let scheme =
            <Scheme as clap::ValueEnum>::from_str(&signing.scheme, true).map_err(|_| {
                RestoreError::UnknownScheme {
                    n: ex.n,
                    scheme: signing.scheme.clone(),
                }
            })?;
        let keys = self.keys(ex.n, scheme, signing)?;
        let signature = scheme.signature_headers()[0];
        // The recorded signature is masked: the request is restored without it.
        let mut unsigned = ex.clone();
        unsigned
            .request
            .headers
            .retain(|h| !h.name.eq_ignore_ascii_case(signature));
        let mut req = self.restore(&unsigned)?;
        let id = scheme
            .signed_id_header()
            .and_then(|name| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
            })
            .map(|h| h.value_str())
            .unwrap_or_default();
        let meta = EventMeta {
            id,
            kind: String::new(),
        };
        let timestamp = Sender::now() + signing.timestamp_offset_s;
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let fresh = scheme.headers(&meta, &req.body, timestamp, &key_refs, 0);
        for name in std::iter::once(signature).chain(scheme.timestamp_header()) {
            if let Some(h) = fresh.iter().find(|h| h.name.eq_ignore_ascii_case(name)) {
                req = req.set_header(name, h.value.clone());
            }
        }
        let with: Vec<String> = signing
            .keys
            .iter()
            .map(|k| match k {
                SigningKey::Var(v) => format!("${v}"),
                SigningKey::Literal(_) => "a key the consumer does not know".into(),
            })
            .collect();
        let how = format!(
            "signed afresh with {}, timestamp {}",
            with.join(" and "),
            match signing.timestamp_offset_s {
                0 => "now".to_string(),
                s => format!("now {s:+} s"),
            }
        );
        Ok(Resent::Ready(req, how))
    }

    /// The HMAC key of each of `signing`'s signatures: a secret from its variable, or the
    /// literal key no consumer knows.
    fn keys(
        &self,
        n: usize,
        scheme: Scheme,
        signing: &Signing,
    ) -> Result<Vec<Vec<u8>>, RestoreError> {
        signing
            .keys
            .iter()
            .map(|k| match k {
                SigningKey::Literal(key) => Ok(key.clone().into_bytes()),
                SigningKey::Var(var) => {
                    let secret = (self.vars)(var).ok_or_else(|| RestoreError::MissingSecret {
                        n,
                        var: var.clone(),
                    })?;
                    self.used
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((var.clone(), secret.clone()));
                    scheme.key(&secret).map_err(|e| RestoreError::BadSecret {
                        var: var.clone(),
                        why: e.to_string(),
                    })
                }
            })
            .collect()
    }

    /// Sends `members` again in order, each beside the answer the report recorded. Every
    /// delivery is signed before any is sent, so a missing secret sends nothing. Returns
    /// whether none was answered.
    pub(super) async fn deliveries(
        &self,
        members: &[RecordedExchange],
        lines: &mut Vec<String>,
    ) -> anyhow::Result<bool> {
        let resent = members
            .iter()
            .map(|ex| self.resent(ex))
            .collect::<Result<Vec<_>, _>>()?;
        let mut answered = false;
        for (ex, resent) in members.iter().zip(resent) {
            match resent {
                Resent::Unsignable => lines.push(format!(
                    "#{} {}: not sent, its signature is over other bytes than those sent, which no key signs again (the report: {})",
                    ex.n,
                    ex.role,
                    ex.status_text()
                )),
                Resent::Ready(req, how) => {
                    let (_, r) = self.client.send(&req).await;
                    answered |= r.result.is_ok();
                    lines.push(format!(
                        "#{} {} ({how}): {} (the report: {})",
                        ex.n,
                        ex.role,
                        status(&r),
                        ex.status_text()
                    ));
                }
            }
        }
        Ok(!answered && !members.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VAR: &str = "IDEM_CHECK_WEBHOOK_SECRET";

    /// A Standard Webhooks delivery as a report keeps it: signature masked, `signing` beside.
    fn delivery(keys: serde_json::Value, offset: i64) -> RecordedExchange {
        serde_json::from_value(json!({
            "n": 2, "role": "delivery", "start_ms": 0.0, "duration_ms": 1.0,
            "request": {"method": "POST", "url": "http://127.0.0.1:1/w", "headers": [
                {"name": "webhook-id", "value": "msg_1"},
                {"name": "webhook-timestamp", "value": "1700000000"},
                {"name": "webhook-signature", "value": "[redacted]", "value_template": "${IDEM_WEBHOOK_SIGNATURE}"},
            ], "body": "{\"type\":\"invoice.paid\"}"},
            "signing": {"scheme": "standard", "keys": keys, "timestamp_offset_s": offset},
        }))
        .unwrap()
    }

    fn header(req: &Request, name: &str) -> String {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value_str())
            .unwrap_or_default()
    }

    /// The delivery goes out signed by the scheme's signer with the exported secret at the
    /// recorded offset from now (a stale one stays stale); a missing variable is named.
    #[test]
    fn a_delivery_is_signed_afresh_with_its_secret_at_its_offset() {
        let r = super::super::tests::replayer(&[(VAR, SECRET)]);
        let ex = delivery(json!([{"var": VAR}]), -360);
        let Ok(Resent::Ready(req, how)) = r.resent(&ex) else {
            panic!("not signed again")
        };
        assert!(how.contains("now -360 s"), "{how}");
        let ts: i64 = header(&req, "webhook-timestamp").parse().unwrap();
        assert!((Sender::now() - 360 - ts).abs() <= 2, "{ts}");
        let meta = EventMeta {
            id: "msg_1".into(),
            kind: String::new(),
        };
        let key = Scheme::Standard.key(SECRET).unwrap();
        let expected = Scheme::Standard.headers(&meta, &req.body, ts, &[&key], 0);
        let signature = expected
            .iter()
            .find(|h| h.name == "webhook-signature")
            .unwrap();
        assert_eq!(header(&req, "webhook-signature"), signature.value_str());

        let missing = super::super::tests::replayer(&[]).resent(&ex);
        assert!(matches!(
            missing,
            Err(RestoreError::MissingSecret { n: 2, ref var }) if var == VAR
        ));
        let tampered = r.resent(&delivery(json!([]), 0));
        assert!(matches!(tampered, Ok(Resent::Unsignable)));
    }
}
