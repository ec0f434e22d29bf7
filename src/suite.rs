//! Suites: which probes run and what each check expects (severity, acceptable statuses).
//!
//! A suite is a TOML file (`suites/README.md` documents every key). The built-in suites are the
//! files in `suites/`, compiled in so the binary works from any directory; a user's file can
//! `extends` one and override only what their API documents differently. Probes read their
//! settings through [`Suite::check`]; nothing about expectations is hard-coded in a probe.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;
use toml::Spanned;

use crate::check::Severity;
use crate::diagnostic::FileError;
use crate::keys::KeySyntax;

/// The suite used when none is named.
pub const DEFAULT_SUITE: &str = "ietf-draft-07";

/// The suites compiled into the binary: (name, file text).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "ietf-draft-07",
        include_str!("../suites/ietf-draft-07.toml"),
    ),
    ("stripe", include_str!("../suites/stripe.toml")),
];

/// A probe as a suite sees it: its id, and each check's id with what it checks. Suites are
/// checked against the probe catalog in this form ([`crate::catalog`] builds it), since the
/// probes themselves read their settings from the suite.
#[derive(Debug, Clone)]
pub struct CatalogProbe {
    pub id: &'static str,
    pub checks: Vec<(&'static str, &'static str)>,
}

/// One check's setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSetting {
    pub severity: Severity,
    pub expect: Vec<u16>,
}

/// A loaded, validated suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub description: String,
    /// The key header's name (`Idempotency-Key`; some APIs use `X-Idempotency-Key`).
    pub header: String,
    pub key_syntax: KeySyntax,
    enabled: BTreeMap<String, bool>,
    checks: BTreeMap<(String, String), CheckSetting>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct SuiteFile {
    name: Option<String>,
    description: Option<String>,
    extends: Option<Spanned<String>>,
    header: Option<Spanned<String>>,
    key_syntax: Option<Spanned<String>>,
    #[serde(default)]
    probes: BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
}

impl Suite {
    /// Loads a built-in suite by name, or a suite file by path, checked against `catalog`.
    pub fn load(name_or_path: &str, catalog: &[CatalogProbe]) -> Result<Suite> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Ok(Suite::parse(
                &format!("suites/{name_or_path}.toml"),
                text,
                Some(catalog),
                0,
            )?);
        }
        let text = std::fs::read_to_string(name_or_path).with_context(|| {
            let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
            format!(
                "suite {name_or_path:?} is neither a built-in suite ({}) nor a readable file",
                names.join(", ")
            )
        })?;
        Ok(Suite::parse(name_or_path, &text, Some(catalog), 0)?)
    }

    /// Parses suite text; `path` is used in error locations. Probe ids and check ids are checked
    /// against `catalog`, and every check of every enabled probe must have a setting; without a
    /// catalog, only the file's own shape is checked.
    pub fn parse(
        path: &str,
        text: &str,
        catalog: Option<&[CatalogProbe]>,
        depth: usize,
    ) -> Result<Suite, FileError> {
        let err = |span: Option<std::ops::Range<usize>>, msg: String| {
            FileError::at(path, text, span, msg)
        };
        let file: SuiteFile = toml::from_str(text)
            .map_err(|e| err(e.span(), format!("invalid suite file: {}", e.message())))?;
        let mut suite = match &file.extends {
            Some(base) if depth < 4 => {
                let (_, base_text) = BUILT_IN
                    .iter()
                    .find(|(n, _)| *n == base.get_ref().as_str())
                    .ok_or_else(|| {
                        err(
                            Some(base.span()),
                            format!("unknown base suite {:?}", base.get_ref()),
                        )
                    })?;
                Suite::parse(
                    &format!("suites/{}.toml", base.get_ref()),
                    base_text,
                    catalog,
                    depth + 1,
                )?
            }
            Some(base) => return Err(err(Some(base.span()), "suites extend too deeply".into())),
            None => Suite {
                name: String::new(),
                description: String::new(),
                header: "Idempotency-Key".into(),
                key_syntax: KeySyntax::SfString,
                enabled: BTreeMap::new(),
                checks: BTreeMap::new(),
            },
        };
        suite.name = file.name.clone().unwrap_or_else(|| {
            std::path::Path::new(path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        if let Some(d) = file.description {
            suite.description = d;
        }
        if let Some(h) = &file.header {
            let name = h.get_ref();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(err(
                    Some(h.span()),
                    format!("{name:?} is not a header name"),
                ));
            }
            suite.header = name.clone();
        }
        if let Some(k) = &file.key_syntax {
            suite.key_syntax = k
                .get_ref()
                .parse()
                .map_err(|e: String| err(Some(k.span()), e))?;
        }
        for (probe_id, settings) in &file.probes {
            let id = probe_id.get_ref().clone();
            let checks = match catalog {
                Some(catalog) => {
                    let def = catalog.iter().find(|p| p.id == id).ok_or_else(|| {
                        let hint = crate::suggest::closest(&id, catalog.iter().map(|p| p.id))
                            .map(|near| format!("did you mean {near:?}? "))
                            .unwrap_or_default();
                        err(
                            Some(probe_id.span()),
                            format!("unknown probe {id:?} ({hint}see `idem-check list`)"),
                        )
                    })?;
                    Some(&def.checks)
                }
                None => None,
            };
            suite.enabled.entry(id.clone()).or_insert(true);
            for (key, value) in settings {
                if key.get_ref() == "enabled" {
                    let on = value.get_ref().as_bool().ok_or_else(|| {
                        err(Some(value.span()), "enabled takes true or false".into())
                    })?;
                    suite.enabled.insert(id.clone(), on);
                    continue;
                }
                if let Some(checks) = checks.filter(|c| !c.iter().any(|(c, _)| c == key.get_ref()))
                {
                    let known: Vec<&str> = checks.iter().map(|(c, _)| *c).collect();
                    return Err(err(
                        Some(key.span()),
                        format!(
                            "probe {id} has no check {:?}; its checks are: {}",
                            key.get_ref(),
                            known.join(", ")
                        ),
                    ));
                }
                let slot = (id.clone(), key.get_ref().clone());
                let previous = suite.checks.get(&slot).cloned();
                let setting = parse_setting(value.get_ref(), previous)
                    .map_err(|e| err(Some(value.span()), e))?;
                suite.checks.insert(slot, setting);
            }
        }
        if let (0, Some(catalog)) = (depth, catalog) {
            suite.ensure_complete(path, text, catalog)?;
        }
        Ok(suite)
    }

    /// Every check of every enabled probe must have a setting, so no probe falls back to a
    /// guessed severity.
    fn ensure_complete(
        &self,
        path: &str,
        text: &str,
        catalog: &[CatalogProbe],
    ) -> Result<(), FileError> {
        for def in catalog {
            if !self.enabled(def.id) {
                continue;
            }
            for (check, what) in &def.checks {
                if !self
                    .checks
                    .contains_key(&(def.id.into(), check.to_string()))
                {
                    return Err(FileError::at(
                        path,
                        text,
                        None,
                        format!(
                            "suite {}: probe {} has no setting for check {:?} ({}); add it under [probes.{}]",
                            self.name, def.id, check, what, def.id
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether the suite runs this probe.
    pub fn enabled(&self, probe: &str) -> bool {
        self.enabled.get(probe).copied().unwrap_or(false)
    }

    /// The setting of one check.
    pub fn check(&self, probe: &str, check: &str) -> Option<&CheckSetting> {
        self.checks.get(&(probe.to_string(), check.to_string()))
    }
}

/// A check setting is a severity (`"required"`) or a table `{ severity = …, expect = [422] }`;
/// a table may leave out what the base suite already says.
fn parse_setting(
    value: &toml::Value,
    previous: Option<CheckSetting>,
) -> Result<CheckSetting, String> {
    let parse_severity = |v: &toml::Value| -> Result<Severity, String> {
        match v.as_str() {
            Some("critical") => Ok(Severity::Critical),
            Some("required") => Ok(Severity::Required),
            Some("recommended") => Ok(Severity::Recommended),
            Some("info") => Ok(Severity::Info),
            _ => Err(format!(
                "{v} is not a severity (critical, required, recommended or info)"
            )),
        }
    };
    match value {
        toml::Value::String(_) => Ok(CheckSetting {
            severity: parse_severity(value)?,
            expect: previous.map(|p| p.expect).unwrap_or_default(),
        }),
        toml::Value::Table(t) => {
            if let Some(k) = t.keys().find(|k| *k != "severity" && *k != "expect") {
                return Err(format!(
                    "unknown key {k:?} (a check takes severity and expect)"
                ));
            }
            let severity = match t.get("severity") {
                Some(v) => parse_severity(v)?,
                None => previous
                    .as_ref()
                    .map(|p| p.severity)
                    .ok_or("severity is missing")?,
            };
            let expect = match t.get("expect") {
                None => previous.map(|p| p.expect).unwrap_or_default(),
                Some(toml::Value::Array(items)) => items
                    .iter()
                    .map(|i| {
                        i.as_integer()
                            .and_then(|n| u16::try_from(n).ok())
                            .filter(|n| (100..=599).contains(n))
                            .ok_or_else(|| format!("{i} is not an HTTP status"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(other) => return Err(format!("expect takes a list of statuses, not {other}")),
            };
            Ok(CheckSetting { severity, expect })
        }
        other => Err(format!(
            "{other} is neither a severity nor a table {{ severity, expect }}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::catalog;

    #[test]
    fn every_built_in_suite_loads_and_covers_its_probes() {
        for (name, _) in BUILT_IN {
            let s = Suite::load(name, &catalog()).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(&s.name, name);
        }
    }

    #[test]
    fn the_default_suite_enables_every_probe() {
        let s = Suite::load(DEFAULT_SUITE, &catalog()).unwrap();
        for p in catalog() {
            assert!(s.enabled(p.id), "{} not in the default suite", p.id);
        }
    }

    #[test]
    fn a_user_suite_overrides_an_expected_status() {
        let text = "name = \"mine\"\nextends = \"ietf-draft-07\"\n[probes.payload-mismatch]\nstatus = { expect = [409] }\n";
        let s = Suite::parse("mine.toml", text, Some(&catalog()), 0).unwrap();
        let c = s.check("payload-mismatch", "status").unwrap();
        assert_eq!(c.expect, vec![409]);
        assert_eq!(c.severity, Severity::Required);
    }

    #[test]
    fn unknown_probe_points_at_the_name() {
        let text = "extends = \"ietf-draft-07\"\n[probes.replay-identitty]\nstatus = \"info\"\n";
        let e = Suite::parse("mine.toml", text, Some(&catalog()), 0).unwrap_err();
        assert_eq!((e.line, e.col), (2, 9));
        assert!(e.message.contains("unknown probe"));
    }

    #[test]
    fn bad_severity_is_located() {
        let text = "extends = \"ietf-draft-07\"\n[probes.missing-key]\nstatus = \"fatal\"\n";
        let e = Suite::parse("mine.toml", text, Some(&catalog()), 0).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("not a severity"));
    }
}
