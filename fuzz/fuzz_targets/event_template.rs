//! `--event` templates (src/webhook/event.rs): a body with `{{event_id}}`, `{{timestamp}}` and
//! `{{unique}}` placeholders, and the variants the webhook checks derive from an event — an
//! unknown type set through a JSON pointer, a tampered body, the same JSON loosened.
//!
//! Input: byte 0 picks the scheme, the rest is the template file. Checks: a template is
//! refused with a reason naming the file or gives events that hold their id; a JSON body stays JSON
//! with an unknown type, and its loosened form is the same JSON plus the one field it adds;
//! the tampered body differs.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use idem_check::webhook::event::Template;
use idem_check::webhook::scheme::Scheme;
use idem_check_fuzz::assert_names;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const SCHEMES: [Scheme; 6] = [
    Scheme::Standard,
    Scheme::Svix,
    Scheme::Stripe,
    Scheme::Github,
    Scheme::Shopify,
    Scheme::Slack,
];

fn template_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("idem-fuzz-event-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir.join("event.json")
    })
}

fuzz_target!(|data: &[u8]| {
    let [pick, text @ ..] = data else {
        return;
    };
    let scheme = SCHEMES[usize::from(*pick) % SCHEMES.len()];
    let path = template_path();
    std::fs::write(path, text).expect("the template is written");
    let template = match Template::load(scheme, path, "--event") {
        Ok(t) => t,
        Err(e) => return assert_names(&e.to_string(), "event.json"),
    };
    let event = template.event_with_id("evt_FUZZ1".into(), 1_700_000_000);
    if template.holds_id() {
        let body = String::from_utf8_lossy(&event.body);
        assert!(
            body.contains("evt_FUZZ1"),
            "the event's id is not in its body"
        );
    }
    assert_ne!(
        event.tampered_body(),
        event.body,
        "the tampered body is the body"
    );
    let json: Option<Value> = serde_json::from_slice(&event.body).ok();
    if let Some(Value::Object(fields)) = &json {
        let loosened: Value =
            serde_json::from_slice(&event.loosened_body()).expect("a JSON object loosened is JSON");
        // The added field comes first, so a `note` of the body's own wins over it.
        let mut expected = fields.clone();
        expected
            .entry("note")
            .or_insert_with(|| Value::String("caf\u{e9}".into()));
        assert_eq!(
            loosened,
            Value::Object(expected),
            "loosening changed the content"
        );
    }
    let unknown = event.clone().of_unknown_type(scheme);
    if json.is_some() && !matches!(scheme, Scheme::Github | Scheme::Shopify) {
        serde_json::from_slice::<Value>(&unknown.body).expect("an unknown type keeps JSON JSON");
    }
});
