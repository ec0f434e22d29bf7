//! The operation under test and its body template: what a probe sends, before any key.

use crate::carrier::Place;
use crate::http::exchange::Header;

/// The operation under test.
#[derive(Clone)]
pub struct Operation {
    pub method: String,
    pub url: url::Url,
    /// Tenant A's headers (`-H`), in order.
    pub headers: Vec<Header>,
    pub body: BodyTemplate,
}

/// The URL with its userinfo and secret query parameters masked, the headers as [`Header`]
/// shows them (credentials masked).
impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("method", &self.method)
            .field("url", &crate::redact::mask_url(self.url.as_str()))
            .field("headers", &self.headers)
            .field("body", &self.body)
            .finish()
    }
}

impl Operation {
    /// `POST https://api.example.com/v1/payments`: how headers and reports name the target.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.url)
    }
}

/// A request body template. `{{unique}}` becomes a value unique to the probe and payload
/// variant; `{{uuid}}` a fresh UUID. A JSON object body without a placeholder gets a unique
/// value appended to its first string field (or an `idem_check_nonce` field when it has none),
/// so payloads still never collide across probes and a "different payload" can be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyTemplate {
    pub text: String,
    /// The top-level field that holds the key (`--key-in-body`): payload variants and the
    /// derived invalid payload change another field, since the key is set over it anyway.
    key_field: Option<String>,
}

impl BodyTemplate {
    pub fn new(text: impl Into<String>) -> Self {
        BodyTemplate {
            text: text.into(),
            key_field: None,
        }
    }

    /// This template with the key carried at `place`: a body key's top-level field is left to
    /// the key.
    pub fn keeping_key(mut self, place: &Place) -> Self {
        if let Place::Body(field) = place {
            let top = field
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default();
            self.key_field = Some(top.replace("~1", "/").replace("~0", "~"));
        }
        self
    }

    /// Whether `name` is a field a variant may change (any but the key's).
    fn variable(&self, name: &str) -> bool {
        self.key_field.as_deref() != Some(name)
    }

    fn has_placeholder(&self) -> bool {
        self.text.contains("{{unique}}") || self.text.contains("{{uuid}}")
    }

    /// A payload the operation must refuse, derived from a JSON object template by giving its
    /// first field a value of the wrong type (a number becomes a string, anything else `null`):
    /// almost every typed API rejects that, and the `{{unique}}` placeholder in the other fields
    /// survives. `None` when the template is not a JSON object with a field.
    pub fn invalid_variant(&self) -> Option<BodyTemplate> {
        let mut map = self.json_object()?;
        let (name, value) = map.iter_mut().find(|(name, _)| self.variable(name))?;
        let broken = if value.is_number() {
            serde_json::Value::String("not-a-number".into())
        } else {
            serde_json::Value::Null
        };
        let name = name.clone();
        map.insert(name, broken);
        Some(BodyTemplate {
            text: serde_json::Value::Object(map).to_string(),
            key_field: self.key_field.clone(),
        })
    }

    /// Whether different variants render to different payloads.
    pub fn varies(&self) -> bool {
        self.has_placeholder() || self.json_object().is_some()
    }

    fn json_object(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        match serde_json::from_str(&self.text) {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ => None,
        }
    }

    /// The payload for `variant` of a probe whose unique value is `unique`.
    pub fn render(&self, unique: &str, variant: u32) -> Vec<u8> {
        let value = if variant == 0 {
            unique.to_string()
        } else {
            format!("{unique}-v{variant}")
        };
        if self.has_placeholder() {
            let mut out = self.text.replace("{{unique}}", &value);
            while out.contains("{{uuid}}") {
                out = out.replacen("{{uuid}}", &uuid::Uuid::new_v4().to_string(), 1);
            }
            return out.into_bytes();
        }
        match self.json_object() {
            Some(mut map) => {
                let first_string = map
                    .iter()
                    .find(|(k, v)| v.is_string() && self.variable(k))
                    .map(|(k, _)| k.clone());
                match first_string {
                    Some(k) => {
                        let old = map[&k].as_str().unwrap_or_default().to_string();
                        map.insert(k, serde_json::Value::String(format!("{old}-{value}")));
                    }
                    None => {
                        map.insert("idem_check_nonce".into(), serde_json::Value::String(value));
                    }
                }
                serde_json::Value::Object(map).to_string().into_bytes()
            }
            None => self.text.clone().into_bytes(),
        }
    }
}

/// A payload the operation must refuse (`error-not-cached`), and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBody {
    pub template: BodyTemplate,
    /// How the evidence names its origin ("--invalid-body", or derived from the template).
    pub origin: &'static str,
}
