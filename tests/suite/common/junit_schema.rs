//! Validating JUnit reports against the Jenkins/Ant `junit-10.xsd` with a real schema validator.

use std::path::{Path, PathBuf};

/// Runs xmllint's schema validation of `files` against the Jenkins/Ant `junit-10.xsd`.
pub fn validate(files: &[PathBuf]) -> std::process::Output {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/schema/junit-10.xsd");
    std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .args(files)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "xmllint validates JUnit against its schema; install it (Debian/Ubuntu: \
                 apt-get install libxml2-utils; .ci/run does): {e}"
            )
        })
}

/// Fails the test, with xmllint's complaint, unless every one of `files` is valid JUnit.
pub fn assert_valid(files: &[PathBuf]) {
    let out = validate(files);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
