//! The body templates (`--event FILE`, and `--unknown-event FILE` for `wh-unknown-type`) and
//! the events made from them. An event is templated once
//! and every delivery of it carries the same bytes, as a real sender's retries do; only the
//! signature and its timestamp change.

use std::path::Path;

use super::scheme::{EventMeta, Scheme};

/// A body template that cannot make events of the scheme; `flag` names the option it came
/// from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadTemplate {
    #[error("{flag} {file}: cannot read it ({why})")]
    Unreadable {
        flag: &'static str,
        file: String,
        why: String,
    },
    #[error("{flag} {file}:1: no {{{{event_id}}}} in the template, but {scheme} keeps the event id in the body ({field}); put \"{field}\": \"{{{{event_id}}}}\" in it")]
    NoEventId {
        flag: &'static str,
        file: String,
        scheme: &'static str,
        field: &'static str,
    },
    #[error("{flag} {file}:{line}: not JSON once its placeholders are filled ({why})")]
    NotJson {
        flag: &'static str,
        file: String,
        line: usize,
        why: String,
    },
}

/// The body every event is made from, and the type the scheme names in a header.
#[derive(Debug, Clone)]
pub struct Template {
    text: String,
    /// The type for GitHub's `X-GitHub-Event` and Shopify's `X-Shopify-Topic`.
    header_kind: String,
}

/// One event as its sender keeps it: the id, the type, and the bytes every delivery carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub meta: EventMeta,
    pub body: Vec<u8>,
}

/// The type `wh-unknown-type` sends: no consumer handles it.
pub const UNKNOWN_TYPE: &str = "idem_check.unknown";

impl Template {
    /// The scheme's default body: compact JSON of a type its consumers commonly handle, with
    /// something of its own in every event (as real events carry their object's id), so two
    /// events share a body only where `wh-distinct-events` makes them.
    pub fn default_for(scheme: Scheme) -> Template {
        let text = match scheme {
            Scheme::Standard | Scheme::Svix => {
                r#"{"type":"invoice.paid","timestamp":"{{timestamp}}","data":{"id":"in_{{unique}}","amount":1250}}"#
            }
            Scheme::Stripe => {
                r#"{"id":"{{event_id}}","object":"event","type":"payment_intent.succeeded","created":{{timestamp}},"data":{"object":{"id":"pi_{{unique}}","amount":1250}}}"#
            }
            Scheme::Github => r#"{"ref":"refs/heads/main","after":"{{unique}}"}"#,
            Scheme::Shopify => {
                r#"{"admin_graphql_api_id":"gid://shopify/Order/{{unique}}","total_price":"12.50"}"#
            }
            Scheme::Slack => {
                r#"{"type":"event_callback","event_id":"{{event_id}}","event_time":{{timestamp}},"event":{"type":"message","text":"hi","client_msg_id":"{{unique}}"}}"#
            }
        };
        Template {
            text: text.into(),
            header_kind: default_header_kind(scheme).into(),
        }
    }

    /// The template in `file` (given with `flag`), checked for what `scheme` needs.
    pub fn load(scheme: Scheme, file: &Path, flag: &'static str) -> Result<Template, BadTemplate> {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| BadTemplate::Unreadable {
            flag,
            file: name.clone(),
            why: e.to_string(),
        })?;
        if scheme.id_in_body() && !text.contains("{{event_id}}") {
            return Err(BadTemplate::NoEventId {
                flag,
                file: name,
                scheme: scheme.name(),
                field: if scheme == Scheme::Stripe {
                    "id"
                } else {
                    "event_id"
                },
            });
        }
        Ok(Template {
            text,
            header_kind: default_header_kind(scheme).into(),
        })
    }

    /// [`Template::load`], and what it makes must be JSON: `--unknown-event`'s body, whose
    /// consumer reads the type from the body. Checked with an event made now, so a
    /// placeholder outside quotes (`"created": {{timestamp}}`) is judged filled.
    pub fn load_json(
        scheme: Scheme,
        file: &Path,
        flag: &'static str,
    ) -> Result<Template, BadTemplate> {
        let template = Template::load(scheme, file, flag)?;
        let sample = template.event(scheme, 0);
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&sample.body) {
            return Err(BadTemplate::NotJson {
                flag,
                file: file.display().to_string(),
                line: e.line(),
                why: e.to_string(),
            });
        }
        Ok(template)
    }

    /// A new event with a fresh id, made at `timestamp`.
    pub fn event(&self, scheme: Scheme, timestamp: i64) -> Event {
        self.event_with_id(scheme.new_event_id(), timestamp)
    }

    /// An event with `id` (two events with the same body when the template does not hold
    /// the id: `wh-distinct-events`), made at `timestamp`.
    pub fn event_with_id(&self, id: String, timestamp: i64) -> Event {
        let body = self
            .text
            .replace("{{event_id}}", &id)
            .replace("{{timestamp}}", &timestamp.to_string())
            .replace("{{unique}}", &uuid::Uuid::new_v4().simple().to_string());
        Event {
            meta: EventMeta {
                id,
                kind: self.header_kind.clone(),
            },
            body: body.into_bytes(),
        }
    }

    /// Whether the body carries the id: two events then never have the same body.
    pub fn holds_id(&self) -> bool {
        self.text.contains("{{event_id}}")
    }
}

impl Event {
    /// The event with a type no consumer handles: in the header for GitHub and Shopify, else
    /// the body's `type` (Slack's `event.type`), the body re-encoded compact.
    pub fn of_unknown_type(self, scheme: Scheme) -> Event {
        let mut e = self.with_unknown_header_kind(scheme);
        if !matches!(scheme, Scheme::Github | Scheme::Shopify) {
            e.body = unknown_in_body(scheme, e.body);
        }
        e
    }

    /// The event with a type no consumer handles in the header, for the schemes that name it
    /// there (GitHub, Shopify); its body as it is (`--unknown-event`'s).
    pub fn with_unknown_header_kind(mut self, scheme: Scheme) -> Event {
        match scheme {
            Scheme::Github => self.meta.kind = UNKNOWN_TYPE.into(),
            Scheme::Shopify => self.meta.kind = "idem_check/unknown".into(),
            _ => {}
        }
        self
    }

    /// The body with a field added: other content, not only other whitespace, which a
    /// consumer that re-encodes before verifying would not see.
    pub fn tampered_body(&self) -> Vec<u8> {
        match self.body.strip_prefix(b"{") {
            Some(rest) => [&b"{\"tampered\":1,"[..], rest].concat(),
            None => [&self.body[..], b" tampered"].concat(),
        }
    }

    /// The same JSON as no encoder writes it (for `wh-raw-body`): an object gets a first field
    /// written with a `\u` escape, and its fields one per line with a space after each colon;
    /// any body ends with a newline. Written from the parsed body, so text inside strings is
    /// never touched (a template whose strings hold `":` keeps them).
    pub fn loosened_body(&self) -> Vec<u8> {
        let object = match serde_json::from_slice::<serde_json::Value>(&self.body) {
            Ok(object @ serde_json::Value::Object(_)) => object,
            _ => return [&self.body[..], b"\n"].concat(),
        };
        let pretty = serde_json::to_string_pretty(&object).unwrap_or_default();
        let fields = pretty.strip_prefix('{').unwrap_or(&pretty);
        let comma = if fields.trim() == "}" { "" } else { "," };
        format!("{{\"note\": \"caf\\u00e9\"{comma}{fields}\n").into_bytes()
    }
}

fn default_header_kind(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Github => "push",
        Scheme::Shopify => "orders/create",
        _ => "",
    }
}

/// `body` with its type (Slack's `event.type`) replaced by one no consumer handles, re-encoded
/// compact; a body that is no JSON object as it is.
fn unknown_in_body(scheme: Scheme, body: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return body;
    };
    let slot = if scheme == Scheme::Slack {
        v.pointer_mut("/event/type")
    } else {
        v.pointer_mut("/type")
    };
    if let Some(slot) = slot {
        *slot = UNKNOWN_TYPE.into();
    } else if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), UNKNOWN_TYPE.into());
    }
    v.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loosening changes the bytes, never the content, even where a string holds `":` or `,"`
    /// (found by the fuzz target `event_template`: the text replacements it had used rewrote
    /// such strings and keys).
    #[test]
    fn a_loosened_body_is_the_same_json_plus_its_note() {
        let template = Template {
            text: r#"{"type":"a\":b","k,\"":{"\":x":[1,"y\",\"z"]},"id":"{{event_id}}"}"#.into(),
            header_kind: "t".into(),
        };
        let event = template.event_with_id("evt_1".into(), 1);
        let loose = event.loosened_body();
        assert_ne!(loose, event.body);
        let mut expected: serde_json::Value = serde_json::from_slice(&event.body).unwrap();
        expected["note"] = "caf\u{e9}".into();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&loose).unwrap(),
            expected
        );
        assert!(String::from_utf8(loose).unwrap().contains("\\u00e9"));
        let empty = Template {
            text: "{}".into(),
            header_kind: "t".into(),
        };
        let loose = empty.event_with_id("e".into(), 1).loosened_body();
        assert_eq!(loose, b"{\"note\": \"caf\\u00e9\"}\n");
    }

    /// `--unknown-event` is refused at start in one line naming the flag and the file: not
    /// readable, or not JSON once its placeholders are filled (a bare `{{timestamp}}` is).
    #[test]
    fn an_unknown_event_must_be_readable_json() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let e = Template::load_json(Scheme::Standard, &missing, "--unknown-event").unwrap_err();
        assert!(matches!(e, BadTemplate::Unreadable { .. }), "{e}");
        assert!(e.to_string().starts_with("--unknown-event "), "{e}");
        let text = dir.path().join("text.json");
        std::fs::write(&text, "{\"type\": \"x\",\n oops}").unwrap();
        let e = Template::load_json(Scheme::Standard, &text, "--unknown-event").unwrap_err();
        assert!(matches!(e, BadTemplate::NotJson { line: 2, .. }), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        let bare = dir.path().join("bare.json");
        std::fs::write(&bare, r#"{"type":"x","created":{{timestamp}}}"#).unwrap();
        assert!(Template::load_json(Scheme::Standard, &bare, "--unknown-event").is_ok());
    }
}
