//! `$ref`s to other documents — a relative file (`schemas/payment.yaml#/Payment`) or an
//! http(s) URL — followed once, when the description is loaded.
//!
//! Each node such a reference names is copied into the document under [`BUNDLE_KEY`], and the
//! reference is rewritten to point at the copy. The walkers ([`super::refs`], [`super::body`],
//! the client's fake API) then stay what they were: synchronous lookups in one tree. Fetching
//! is asynchronous and bounded, and that happens here only, before any walker runs.
//!
//! - A relative reference resolves against the document that holds it, so nested references
//!   in an external file are relative to that file, and local ones (`#/…`) in it name that
//!   file's nodes.
//! - Each document is read or fetched once, before anything is copied ([`read_all`]), and each
//!   node is copied once ([`Bundler::slots`]): a reference cycle across files becomes a cycle
//!   of local references, which the walkers already cut.
//! - A remote document is fetched with the loader's client (the run's connection settings), at most [`MAX_REMOTE_BYTES`] and
//!   [`FETCH_LIMIT`] each, and within [`REMOTE_BUDGET`] for all of them together: a reference
//!   that hangs, is huge or redirects in a loop costs seconds, never the run.
//! - A reference that cannot be followed (unreadable, 404, too big, not JSON or YAML, a missing
//!   pointer) is replaced by an [`UNRESOLVED`] marker naming it and why. What it named is left
//!   out, and every operation that reaches the marker carries a note ([`notes`]); the rest of
//!   the document is discovered as usual.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::document::{self, Spec};
use super::refs;
use crate::http::Connector;

/// Where copies of externally referenced nodes are kept in the document.
pub const BUNDLE_KEY: &str = "x-idem-check-external";

/// The key of the marker that replaces a reference that could not be followed.
pub const UNRESOLVED: &str = "x-idem-check-unresolved";

/// The most one remote document may weigh: schemas are kilobytes, and a bigger answer is more
/// likely an error page or a whole other API.
const MAX_REMOTE_BYTES: usize = 1024 * 1024;

/// How long fetching one remote document may take, from connecting to its last byte.
const FETCH_LIMIT: Duration = Duration::from_secs(5);

/// How long fetching every remote document of one description may take, together: a chain of
/// slow documents, each referencing the next, ends here.
const REMOTE_BUDGET: Duration = Duration::from_secs(15);

/// How many other documents one description may reference.
const MAX_DOCUMENTS: usize = 64;

/// How many nodes may be copied in: far more than any real description needs, few enough that
/// a generated maze of references ends quickly.
const MAX_NODES: usize = 4096;

/// A document's identity: its canonical path, or its URL without fragment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    File(PathBuf),
    Url(url::Url),
}

/// A document: its identity, and its name as shown in notes.
#[derive(Debug, Clone)]
struct Doc {
    key: Key,
    shown: String,
}

impl Doc {
    /// The description itself, as given on the command line.
    fn main(source: &str) -> Doc {
        let key = match url::Url::parse(source) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Key::Url(without_fragment(u)),
            _ => Key::File(canonical(Path::new(source))),
        };
        Doc {
            key,
            shown: source.to_string(),
        }
    }

    /// The document `target` (a reference without its fragment) names: this one when empty.
    fn join_nonempty(&self, target: &str) -> Result<Doc, String> {
        if target.is_empty() {
            Ok(self.clone())
        } else {
            self.join(target)
        }
    }

    /// The document `target` (a reference without its fragment) names, relative to this one.
    fn join(&self, target: &str) -> Result<Doc, String> {
        match url::Url::parse(target) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {
                return Ok(Doc {
                    shown: u.to_string(),
                    key: Key::Url(without_fragment(u)),
                });
            }
            Ok(u) => {
                return Err(format!(
                    "uses the {}: scheme; only relative files and http(s) URLs are followed",
                    u.scheme()
                ))
            }
            // A relative reference; a Windows-style `C:\…` path parses as a scheme and is
            // refused above, which is right for a document that must also work elsewhere.
            Err(_) => {}
        }
        match &self.key {
            Key::Url(base) => {
                let u = base
                    .join(target)
                    .map_err(|e| format!("is not a valid URL relative to {base}: {e}"))?;
                Ok(Doc {
                    shown: u.to_string(),
                    key: Key::Url(without_fragment(u)),
                })
            }
            Key::File(_) => {
                let relative = percent_encoding::percent_decode_str(target)
                    .decode_utf8()
                    .map_err(|_| "is not valid UTF-8 once percent-decoded".to_string())?;
                let shown_path = Path::new(&self.shown)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .join(relative.as_ref());
                Ok(Doc {
                    key: Key::File(canonical(&shown_path)),
                    shown: shown_path.display().to_string(),
                })
            }
        }
    }
}

fn without_fragment(mut u: url::Url) -> url::Url {
    u.set_fragment(None);
    u
}

/// The canonical path when the file exists; the path as given otherwise (reading it will fail
/// with the reason).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What a reference is rewritten to.
enum Rewrite {
    /// A local reference (`#/…`) into the document.
    Local(String),
    /// It cannot be followed, for this reason.
    Unresolved(String),
}

/// Each document read or fetched, or why it could not be.
type Documents = HashMap<Key, Result<Value, String>>;

/// Copies the nodes external references name into the description.
struct Bundler {
    main: Doc,
    documents: Documents,
    /// The copy's index of each (document, pointer) already referenced.
    slots: HashMap<(Key, String), usize>,
    /// The copies, by index; `Null` until filled.
    nodes: Vec<Value>,
    /// Copies still to make: index, document, pointer.
    pending: Vec<(usize, Doc, String)>,
    /// Markers placed.
    unresolved: usize,
}

/// Follows every reference of `spec` to another document (see the module comment). A
/// description without such references is left as it is.
pub async fn bundle(spec: &mut Spec, connector: &Arc<Connector>) {
    if !spec.root.is_object() || !has_external(&spec.root) {
        return;
    }
    let main = Doc::main(&spec.source);
    let mut b = Bundler {
        documents: read_all(&main, &spec.root, connector).await,
        slots: HashMap::new(),
        nodes: Vec::new(),
        pending: Vec::new(),
        unresolved: 0,
        main: main.clone(),
    };
    b.rewrite(&mut spec.root, &main);
    while let Some((slot, doc, pointer)) = b.pending.pop() {
        let mut node = match b.documents.get(&doc.key) {
            Some(Ok(d)) => d.pointer(&pointer).cloned().unwrap_or(Value::Null),
            _ => Value::Null,
        };
        b.rewrite(&mut node, &doc);
        b.nodes[slot] = node;
    }
    if let Value::Object(root) = &mut spec.root {
        root.insert(BUNDLE_KEY.to_string(), Value::Array(b.nodes));
    }
    spec.unresolved = b.unresolved;
}

/// Every document reachable from the description, in waves: those it references, then those
/// they reference, and so on. A wave's documents are fetched together, so one that hangs
/// delays the others by [`FETCH_LIMIT`] at most, never by its own hang.
async fn read_all(main: &Doc, root: &Value, connector: &Arc<Connector>) -> Documents {
    let mut documents = Documents::new();
    let deadline = Instant::now() + REMOTE_BUDGET;
    let mut client = None;
    let mut wave = referenced(main, root);
    while !wave.is_empty() {
        let mut seen = HashSet::new();
        wave.retain(|d| {
            d.key != main.key && !documents.contains_key(&d.key) && seen.insert(d.key.clone())
        });
        let room = MAX_DOCUMENTS.saturating_sub(documents.len());
        for d in wave.split_off(room.min(wave.len())) {
            documents.insert(
                d.key,
                Err(format!(
                    "is not read: the description references more than {MAX_DOCUMENTS} other \
                     documents"
                )),
            );
        }
        if client.is_none() && wave.iter().any(|d| matches!(d.key, Key::Url(_))) {
            // Each fetch is bounded below by its own timeout, which names the limit; the client's
            // is only a backstop.
            client = Some(document::client(connector, REMOTE_BUDGET));
        }
        let read =
            futures::future::join_all(wave.iter().map(|d| read(d, client.as_ref(), deadline)));
        let mut next = Vec::new();
        for (d, r) in wave.iter().zip(read.await) {
            if let Ok(v) = &r {
                next.extend(referenced(d, v));
            }
            documents.insert(d.key.clone(), r);
        }
        wave = next;
    }
    documents
}

/// The documents `node`, which belongs to `doc`, references (some may not exist).
fn referenced(doc: &Doc, node: &Value) -> Vec<Doc> {
    let mut out = Vec::new();
    collect(node, &mut |r| {
        let target = r.split_once('#').map_or(r, |(t, _)| t);
        if let Ok(d) = doc.join_nonempty(target) {
            out.push(d);
        }
    });
    out
}

/// The parsed document, read from its file or fetched within [`FETCH_LIMIT`] and what is left
/// of [`REMOTE_BUDGET`]; `Err` is a phrase that follows the document's name.
async fn read(
    doc: &Doc,
    client: Option<&Result<reqwest::Client, String>>,
    deadline: Instant,
) -> Result<Value, String> {
    let text = match &doc.key {
        Key::File(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {e}"))?
        }
        Key::Url(url) => {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "is not fetched: remote references took their {} s already",
                    REMOTE_BUDGET.as_secs()
                ));
            }
            let client = match client {
                Some(Ok(c)) => c,
                Some(Err(why)) => return Err(format!("is not fetched: {why}")),
                None => return Err("is not fetched: no HTTP client".into()),
            };
            let limit = left.min(FETCH_LIMIT);
            let fetch = document::fetch_text(client, url.as_str(), MAX_REMOTE_BYTES);
            tokio::time::timeout(limit, fetch)
                .await
                .map_err(|_| format!("gave no whole answer within {} s", limit.as_secs_f64()))??
        }
    };
    let parsed = document::parse(&doc.shown, &text).map_err(|e| match e.location {
        Some(super::Location::Line(line, col)) => {
            format!(
                "cannot be parsed (line {line}, column {col}): {}",
                e.message
            )
        }
        None => format!("cannot be parsed: {}", e.message),
    })?;
    if parsed.root.is_object() || parsed.root.is_array() {
        Ok(parsed.root)
    } else {
        Err("is not a JSON or YAML document".into())
    }
}

impl Bundler {
    /// Rewrites the references in `node`, which belongs to `doc`: external ones always, local
    /// ones when `doc` is not the description itself (they name nodes of `doc`).
    fn rewrite(&mut self, node: &mut Value, doc: &Doc) {
        let is_main = doc.key == self.main.key;
        let mut rewrites = HashMap::new();
        let mut found = Vec::new();
        collect(node, &mut |r| {
            if !(is_main && r.starts_with('#')) {
                found.push(r.to_string());
            }
        });
        for r in found {
            rewrites
                .entry(r)
                .or_insert_with_key(|r| self.follow(doc, r));
        }
        if rewrites.is_empty() {
            return;
        }
        let shown_in = (!is_main).then(|| doc.shown.clone());
        apply(node, &rewrites, shown_in.as_deref(), &mut self.unresolved);
    }

    /// Where reference `r`, found in `doc`, now points.
    fn follow(&mut self, doc: &Doc, r: &str) -> Rewrite {
        let (written, fragment) = r.split_once('#').unwrap_or((r, ""));
        let pointer = match percent_encoding::percent_decode_str(fragment).decode_utf8() {
            Ok(p) if p.is_empty() || p.starts_with('/') => p.into_owned(),
            Ok(_) => {
                return Rewrite::Unresolved(
                    "names an anchor, not a JSON pointer; only pointers (#/…) are followed".into(),
                )
            }
            Err(_) => return Rewrite::Unresolved("is not valid UTF-8 once percent-decoded".into()),
        };
        let target = match doc.join_nonempty(written) {
            Ok(t) => t,
            Err(why) => return Rewrite::Unresolved(why),
        };
        if target.key == self.main.key {
            return Rewrite::Local(format!("#{fragment}"));
        }
        // The document's name goes first unless the reference already says it.
        let named = |why: &str| {
            if target.shown == written {
                why.to_string()
            } else {
                format!("{} {why}", target.shown)
            }
        };
        let found = match self.documents.get(&target.key) {
            Some(Ok(d)) => d.pointer(&pointer),
            Some(Err(why)) => return Rewrite::Unresolved(named(why)),
            None => return Rewrite::Unresolved(named("was not read")),
        };
        match found {
            Some(Value::Object(_) | Value::Bool(_)) => {}
            Some(_) => {
                return Rewrite::Unresolved(format!(
                    "names a value in {} that is not an object",
                    target.shown
                ))
            }
            None => return Rewrite::Unresolved(format!("points at nothing in {}", target.shown)),
        }
        let slot_key = (target.key.clone(), pointer.clone());
        let slot = match self.slots.get(&slot_key) {
            Some(s) => *s,
            None if self.nodes.len() >= MAX_NODES => {
                return Rewrite::Unresolved(format!(
                    "is one reference too many: at most {MAX_NODES} nodes are copied from other \
                     documents"
                ))
            }
            None => {
                let s = self.nodes.len();
                self.nodes.push(Value::Null);
                self.slots.insert(slot_key, s);
                self.pending.push((s, target, pointer));
                s
            }
        };
        Rewrite::Local(format!("#/{BUNDLE_KEY}/{slot}"))
    }
}

/// True when some `$ref` of `root` names another document.
fn has_external(root: &Value) -> bool {
    let mut any = false;
    collect(root, &mut |r| any |= !r.starts_with('#'));
    any
}

/// Calls `f` with every `$ref` string in `node`. Examples hold data, not schema: a `$ref` key
/// inside one is just a field.
fn collect(node: &Value, f: &mut dyn FnMut(&str)) {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                f(r);
            }
            for (k, child) in map {
                if k != "example" {
                    collect(child, f);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|c| collect(c, f)),
        _ => {}
    }
}

/// Replaces each `$ref` of `node` found in `rewrites`.
fn apply(
    node: &mut Value,
    rewrites: &HashMap<String, Rewrite>,
    shown_in: Option<&str>,
    unresolved: &mut usize,
) {
    match node {
        Value::Object(map) => {
            let hit = match map.get("$ref") {
                Some(Value::String(r)) => rewrites.get(r).map(|to| (r.clone(), to)),
                _ => None,
            };
            match hit {
                Some((_, Rewrite::Local(to))) => {
                    map.insert("$ref".into(), Value::String(to.clone()));
                }
                Some((r, Rewrite::Unresolved(why))) => {
                    map.remove("$ref");
                    let mut marker = Map::new();
                    marker.insert("ref".into(), Value::String(r));
                    if let Some(d) = shown_in {
                        marker.insert("in".into(), Value::String(d.to_string()));
                    }
                    marker.insert("why".into(), Value::String(why.clone()));
                    map.insert(UNRESOLVED.into(), Value::Object(marker));
                    *unresolved += 1;
                }
                None => {}
            }
            for (k, child) in map.iter_mut() {
                if k != "example" && k != UNRESOLVED {
                    apply(child, rewrites, shown_in, unresolved);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|c| apply(c, rewrites, shown_in, unresolved)),
        _ => {}
    }
}

/// True when `node` (a `$ref` chain followed) is a reference that could not be followed.
pub fn left_out(root: &Value, node: &Value) -> bool {
    refs::resolve(root, node).is_ok_and(|n| n.get(UNRESOLVED).is_some())
}

/// One line per reference that could not be followed and is reachable from `nodes` (through
/// local references): what an operation built from them is missing, and why.
pub fn notes(root: &Value, nodes: &[&Value]) -> Vec<String> {
    let mut seen_refs = HashSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = nodes.to_vec();
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(m) = map.get(UNRESOLVED) {
                    let line = note(m);
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
                if let Some(r) = refs::reference(node) {
                    if seen_refs.insert(r) {
                        if let Ok(target) = refs::lookup(root, r) {
                            stack.push(target);
                        }
                    }
                }
                stack.extend(
                    map.iter()
                        .filter(|(k, _)| *k != "example" && *k != UNRESOLVED)
                        .map(|(_, v)| v),
                );
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out.sort();
    out
}

/// `$ref "receipt.json" (in schemas/payment.yaml) left out: cannot read …`.
fn note(marker: &Value) -> String {
    let field = |k: &str| marker.get(k).and_then(Value::as_str).unwrap_or_default();
    let within = match marker.get("in").and_then(Value::as_str) {
        Some(d) => format!(" (in {d})"),
        None => String::new(),
    };
    format!("$ref {:?}{within} left out: {}", field("ref"), field("why"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn relative_files_join_against_the_referring_document() {
        let main = Doc::main("api/openapi.yaml");
        let d = main.join("schemas/pay%20ment.yaml").unwrap();
        assert_eq!(d.shown, "api/schemas/pay ment.yaml");
        let nested = d.join("../common.yaml").unwrap();
        assert_eq!(nested.shown, "api/schemas/../common.yaml");
        let remote = Doc::main("https://example.com/a/openapi.json");
        assert_eq!(
            remote.join("b.json#/X").unwrap().shown,
            "https://example.com/a/b.json#/X"
        );
        assert_eq!(
            remote.join("b.json#/X").unwrap().key,
            Key::Url(url::Url::parse("https://example.com/a/b.json").unwrap())
        );
        assert!(main
            .join("file:///etc/passwd")
            .unwrap_err()
            .contains("file:"));
    }

    #[test]
    fn notes_follow_local_references_once_and_skip_examples() {
        let root = json!({
            "components": {"schemas": {
                "A": {"properties": {"b": {"$ref": "#/components/schemas/B"},
                                     "self": {"$ref": "#/components/schemas/A"}}},
                "B": {UNRESOLVED: {"ref": "b.json", "in": "x.yaml", "why": "cannot read"}}
            }},
            "op": {"schema": {"$ref": "#/components/schemas/A"},
                   "example": {UNRESOLVED: {"ref": "no", "why": "data"}}}
        });
        assert_eq!(
            notes(&root, &[&root["op"]]),
            [r#"$ref "b.json" (in x.yaml) left out: cannot read"#]
        );
        assert!(left_out(&root, &json!({"$ref": "#/components/schemas/B"})));
        assert!(!left_out(&root, &json!({"$ref": "#/components/schemas/A"})));
    }
}
