//! The probe catalog as suites see it, and suites loaded against it.
//!
//! A suite names probes and their checks, and the probes read their settings from the suite, so
//! the suite cannot look the catalog up itself without the two importing each other: the
//! catalog is handed to [`crate::suite`] from here instead.

use anyhow::Result;

use crate::probes;
use crate::suite::{CatalogProbe, Suite};

/// Every probe of the catalog with its checks, in catalog order.
pub fn catalog() -> Vec<CatalogProbe> {
    probes::catalog()
        .iter()
        .map(|p| CatalogProbe {
            id: p.meta.id,
            checks: p.meta.checks.iter().map(|c| (c.id, c.what)).collect(),
        })
        .collect()
}

/// A built-in suite by name, or a suite file by path, checked against the catalog.
pub fn load_suite(name_or_path: &str) -> Result<Suite> {
    Suite::load(name_or_path, &catalog())
}
