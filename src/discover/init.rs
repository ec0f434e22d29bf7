//! `init --openapi`: one commented target file per operation, for users who want to read and
//! edit before running. Everything the document did not say (a base URL, a path parameter, a
//! credential) is a `${VAR}` placeholder taken from the environment at run time, with a comment
//! saying what to put there.

use std::fmt::Write as _;

use super::Operation;

/// The file name for an operation: its id with anything unsafe in a file name replaced.
pub fn file_name(op: &Operation) -> String {
    let safe: String = op
        .operation_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.toml", safe.trim_start_matches('.'))
}

/// The target file text for `op`, read from `document`, to be written at `path` (the path the
/// user gave, so the command it suggests runs from where `init` ran).
pub fn target_file(op: &Operation, document: &str, path: &std::path::Path) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# idem-check target: {} ({} {})",
        one_line(&op.operation_id),
        op.method,
        one_line(&op.path)
    );
    let _ = writeln!(
        out,
        "# written from {} by `idem-check init`; run it with",
        one_line(document)
    );
    let _ = writeln!(
        out,
        "#   idem-check run --target {}",
        one_line(&path.display().to_string())
    );
    let _ = writeln!(
        out,
        "# ${{VAR}} placeholders are read from the environment and masked in reports."
    );
    let _ = writeln!(out);
    let base = match &op.base {
        Ok(b) => b.clone(),
        Err(why) => {
            let _ = writeln!(out, "# BASE_URL: {}", one_line(why));
            "${BASE_URL}".to_string()
        }
    };
    for name in &op.unfilled {
        let _ = writeln!(
            out,
            "# {}: the path parameter {} (the document gives no example)",
            super::env_name(name),
            one_line(name)
        );
    }
    let mut url = format!("{base}{}", op.filled_path);
    let queries: Vec<&str> = op
        .credentials
        .iter()
        .filter_map(|c| c.query.as_deref())
        .collect();
    if !queries.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&queries.join("&"));
    }
    let _ = writeln!(out, "url = {}", q(&url));
    let _ = writeln!(out, "method = {}", q(&op.method));
    let how = format!(
        "{}, matched by {}",
        if op.required { "required" } else { "optional" },
        match op.matched {
            super::header::Match::Name => "its name",
            super::header::Match::Alias => "a known alias",
            super::header::Match::Description => "its description",
        }
    );
    match &op.key {
        crate::carrier::Place::Header(name) => {
            let _ = writeln!(
                out,
                "# the document declares this header as the key ({how})"
            );
            let _ = writeln!(out, "key-header = {}", q(name));
        }
        crate::carrier::Place::Body(pointer) => {
            let _ = writeln!(
                out,
                "# the document declares the key in the request body ({how})"
            );
            let _ = writeln!(out, "key-in-body = {}", q(pointer));
        }
    }
    let _ = writeln!(out, "headers = [");
    if let Some(ct) = &op.body.content_type {
        let _ = writeln!(out, "  {},", q(&format!("Content-Type: {ct}")));
    }
    for c in &op.credentials {
        let _ = writeln!(
            out,
            "  # security scheme {} ({}): set {}",
            one_line(&c.scheme),
            one_line(&c.kind),
            c.variable
        );
        if let Some(h) = &c.header {
            let _ = writeln!(out, "  {},", q(h));
        }
    }
    let _ = writeln!(out, "]");
    match (&op.body.text, op.body.source) {
        (Some(text), source) => {
            let _ = writeln!(
                out,
                "# body: {}; {{{{unique}}}} makes it unique per probe",
                match source {
                    super::body::BodySource::Example => "the document's example",
                    _ => "generated from the request schema (required properties only)",
                }
            );
            let _ = writeln!(out, "body = {}", q(text));
        }
        (None, _) => {
            let _ = writeln!(out, "# the operation declares no request body");
        }
    }
    match &op.id_pointer {
        Some(p) => {
            let _ = writeln!(
                out,
                "# the 2xx response has an id: executions are counted by it"
            );
            let _ = writeln!(out, "id-pointer = {}", q(p));
        }
        None => {
            let _ = writeln!(
                out,
                "# id-pointer = \"/id\"   # where a 2xx body holds the new resource's id"
            );
        }
    }
    out.push_str(&optional(&one_line(&base)));
    out
}

/// Text from the document, safe inside a `#` comment line.
fn one_line(s: &str) -> String {
    crate::redact::sanitize_line(s)
}

/// The options a document cannot know, commented out, their URLs under `base` (the operation's
/// base URL, or the `${BASE_URL}` placeholder the file already explains), so a line runs as
/// written once uncommented and its path corrected.
fn optional(base: &str) -> String {
    format!(
        "
# Stronger verdicts and more probes (see `idem-check list`), uncomment what the API offers:
# [counter]            # an effect counter read before and after each probe
# url = \"{base}/count\"
# pointer = \"/count\"
# [tenant-b]           # a second identity (tenant-isolation): set TENANT_B_TOKEN
# headers = [\"Authorization: Bearer ${{TENANT_B_TOKEN}}\"]
# [restart]            # restart-persistence
# command = \"systemctl restart my-api\"
# ready-url = \"{base}/healthz\"
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::{discover, document, Options};

    /// A document's host with a control character in it still gives a target file that reads
    /// back as TOML, whose URL is then refused at its line: the commented-out lines show the
    /// base URL made safe, since a TOML comment cannot hold a control character (found by the
    /// fuzz target `openapi`).
    #[test]
    fn a_host_with_control_characters_gives_a_file_that_reads_back() {
        let doc = "swagger: \"2.0\"\ninfo: {title: t, version: \"1\"}\n\
                   host: \"pay.example\\x0e\"\nschemes: [http]\npaths:\n  /t:\n    post:\n\
                   \x20     parameters:\n        - {name: Idempotency-Key, in: header, type: string}\n\
                   \x20     responses: {\"201\": {description: ok}}\n";
        let spec = document::parse("api.yaml", doc).unwrap();
        let found = discover(&spec, &Options::default()).unwrap();
        let file = target_file(
            &found.operations[0],
            "api.yaml",
            std::path::Path::new("t.toml"),
        );
        let env = [("BASE_URL".to_string(), "http://127.0.0.1:9".to_string())].into();
        let e = crate::target::parse("t.toml", &file, &env, std::path::Path::new(".")).unwrap_err();
        assert!(
            e.message.ends_with("is not a URL") && e.line == 6,
            "{e}\n{file}"
        );
    }
}
