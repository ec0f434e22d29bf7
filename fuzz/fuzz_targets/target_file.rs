//! Target files (src/target.rs) and their validation into a run's config (src/config.rs):
//! TOML of any shape, `${VAR}` placeholders, headers, bodies, key carriers and their JSON
//! pointers, TLS and proxy settings.
//!
//! Input: the file's text. The environment holds one secret, which the file may take through
//! `${TOKEN}`. Checks: no error, from the file's reading or from the config's validation,
//! shows the secret; an error says what is wrong; and when the config holds a
//! key carried in the body, the key put into the body reads back unchanged (the pointer round
//! trip of src/carrier/placement.rs).
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use idem_check::carrier::Place;
use idem_check::config::{Config, RunOptions};
use idem_check::http::Request;
use idem_check::suite::Suite;
use idem_check_fuzz::assert_shown_safely;
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "s3cr3t-Tok3n-9f2c";

fn suite() -> &'static Suite {
    static SUITE: OnceLock<Suite> = OnceLock::new();
    SUITE.get_or_init(|| {
        idem_check::catalog::load_suite(idem_check::suite::DEFAULT_SUITE)
            .expect("the default suite")
    })
}

fuzz_target!(|data: &[u8]| {
    // A file that holds the secret itself shows it in its own excerpt: not a leak.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains(SECRET) {
        return;
    }
    let env: BTreeMap<String, String> = [("TOKEN".to_string(), SECRET.to_string())].into();
    let mut spec = match idem_check::target::parse("t.toml", text, &env, Path::new("/nonexistent"))
    {
        Ok(spec) => spec,
        Err(e) => return assert_shown_safely(&e.to_string(), SECRET),
    };
    // A command in the file would run while the config is built: fuzzing runs none.
    spec.auth_cmd = None;
    let config = match Config::build(spec, &RunOptions::new(suite().clone()), None) {
        Ok(config) => config,
        Err(e) => return assert_shown_safely(&format!("{e:#}"), SECRET),
    };
    let place = &config.key_carrier.place;
    if let Place::Body(_) = place {
        let op = &config.operation;
        let req = Request {
            method: op.method.clone(),
            url: op.url.clone(),
            headers: op.headers.clone(),
            body: op.body.render("u1", 0),
        };
        let keyed = place.put(req, b"key-\"1\"/~");
        assert_eq!(
            place.value_in(&keyed.headers, &keyed.body).as_deref(),
            Some(&b"key-\"1\"/~"[..]),
            "a key put at {place} does not read back from {:?}",
            String::from_utf8_lossy(&keyed.body)
        );
    }
});
