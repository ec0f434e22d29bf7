//! Request building: the configured operation with this probe's payloads, keys written in the
//! run's key form, and tenant B's credentials.

use std::sync::Arc;

use crate::carrier::KeyCarrier;
use crate::config::Config;
use crate::http::Request;
use crate::keys::KeySyntax;

/// The operation as this probe sends it.
#[derive(Clone)]
pub struct Requests {
    config: Arc<Config>,
    /// A value unique to this probe run, which every payload carries.
    unique: String,
}

impl Requests {
    pub fn new(config: Arc<Config>, probe: &str) -> Self {
        let unique = format!(
            "idem-check-{probe}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        Requests { config, unique }
    }

    /// A value unique to this probe run, for payloads.
    pub fn unique(&self) -> &str {
        &self.unique
    }

    /// The configured operation with payload `variant` (each variant is a different payload,
    /// all unique to this probe) and no key.
    pub fn operation(&self, variant: u32) -> Request {
        let op = &self.config.operation;
        let mut headers = op.headers.clone();
        // Every transport sends the credential --auth-cmd printed last, the bursts' too.
        if let Some(credential) = &self.config.auth {
            credential.apply(&mut headers);
        }
        Request {
            method: op.method.clone(),
            url: op.url.clone(),
            headers,
            body: op.body.render(&self.unique, variant),
        }
    }

    /// The operation with payload `variant` and the key set to exactly `value` in its carrier
    /// (the header, or the body field).
    pub fn with_key_value(&self, value: impl Into<Vec<u8>>, variant: u32) -> Request {
        self.carrier()
            .place
            .put(self.operation(variant), &value.into())
    }

    /// `req` with the key removed from its carrier.
    pub fn without_key(&self, req: Request) -> Request {
        self.carrier().place.remove(req)
    }

    /// Where the run's keys travel and how they are written.
    pub fn carrier(&self) -> &KeyCarrier {
        &self.config.key_carrier
    }

    /// The operation with `body` instead of its payload and `key` written as `keys` writes it,
    /// in its carrier: the key is set after the body is, so a body key survives the swap.
    pub fn keyed_body(&self, keys: KeySyntax, key: &str, body: Vec<u8>) -> Request {
        let req = self.operation(0).with_body(body);
        self.carrier().place.put(req, keys.encode(key).as_bytes())
    }

    /// The operation with `key` written as `keys` writes it, payload `variant`.
    pub fn keyed(&self, keys: KeySyntax, key: &str, variant: u32) -> Request {
        self.with_key_value(keys.encode(key).into_bytes(), variant)
    }

    /// Rewrites a request as tenant B (the `--tenant-b-header` lines replace A's same-named
    /// ones). `None` without a second tenant.
    pub fn as_tenant_b(&self, req: Request) -> Option<Request> {
        let b = self.config.tenant_b.as_ref()?;
        let mut req = req;
        for h in b {
            req = req.without_header(&h.name);
        }
        let mut headers = b.clone();
        headers.extend(req.headers);
        req.headers = headers;
        Some(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;
    use crate::probes::kit::fake;

    #[test]
    fn a_keyed_request_carries_the_key_in_the_runs_form() {
        let config = Arc::new(fake::config());
        let r = Requests::new(config.clone(), "probe");
        let req = r.keyed(KeySyntax::Bare, "k1", 0);
        let header = &config.suite.header;
        assert_eq!(req.headers.iter().filter(|h| &h.name == header).count(), 1);
        assert!(r.without_key(req).headers.iter().all(|h| &h.name != header));
        assert!(r.unique().starts_with("idem-check-probe-"));
    }

    #[test]
    fn tenant_b_headers_replace_tenant_as() {
        let mut config = fake::config();
        config.tenant_b = Some(vec![Header::new("Authorization", "Bearer b")]);
        let r = Requests::new(Arc::new(config), "probe");
        let a = r.operation(0).set_header("authorization", "Bearer a");
        let b = r.as_tenant_b(a).unwrap();
        let auth: Vec<_> = b
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("authorization"))
            .collect();
        assert_eq!(auth.len(), 1);
        assert_eq!(auth[0].value, b"Bearer b");
    }
}
