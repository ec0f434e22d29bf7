//! API descriptions (src/discover/): OpenAPI 3.x and Swagger 2.0 documents as JSON or YAML,
//! their local `$ref`s (cycles, depth), parameters, request bodies and security schemes, and
//! the target file `init --openapi` writes for each operation found.
//!
//! Input: the document's text. Checks: an error names the document; every
//! target file written for an operation reads back as TOML with only known keys (the round trip of
//! `init` into `run --target`), its `${VAR}` placeholders given values.
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use idem_check::discover::{self, document, init, Options};
use idem_check_fuzz::assert_names;
use libfuzzer_sys::fuzz_target;

/// The names of the `${VAR}` placeholders in `text`.
fn placeholders(text: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        env.insert(after[..end].to_string(), "http://127.0.0.1:9".to_string());
        rest = &after[end + 1..];
    }
    env
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match document::parse("api.yaml", text) {
        Ok(spec) => spec,
        Err(e) => return assert_names(&e.to_string(), "api.yaml"),
    };
    let found = match discover::discover(&spec, &Options::default()) {
        Ok(found) => found,
        Err(e) => return assert_names(&e.to_string(), "api.yaml"),
    };
    for op in &found.operations {
        let file = init::target_file(op, "api.yaml", Path::new("t.toml"));
        // A value the document got wrong (a host no URL can have) is refused at its line;
        // TOML that does not read, or a key the reader does not know, is init's own fault.
        if let Err(e) =
            idem_check::target::parse("t.toml", &file, &placeholders(&file), Path::new("."))
        {
            assert!(
                !e.message.starts_with("invalid target file"),
                "init wrote a target file that does not read back: {e}\n{file}"
            );
        }
    }
});
