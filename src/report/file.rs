//! Writing report files so that a reader never sees half of one.
//!
//! A CI step that uploads `report.xml` while idem-check is still writing it, or a run killed
//! mid-write, must find either the previous file or the new one, never a truncated mix. And a
//! rerun replaces the old verdicts instead of appending to them (hurl appends; STYLE §5).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// Writes `contents` to `path` through a temporary file in the same directory, then renames it
/// over `path` (a rename within one file system is atomic).
pub fn write_atomically(path: &Path, contents: &str) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".idem-check-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(contents.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    // Temporary files are private (0600); a report is meant to be read by CI tooling and people.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot set permissions on {}", tmp.path().display()))?;
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_previous_report_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.xml");
        std::fs::write(&path, "old verdicts").unwrap();
        write_atomically(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let err = write_atomically(Path::new("/nonexistent-dir/r.json"), "x").unwrap_err();
        assert!(format!("{err:#}").contains("/nonexistent-dir"), "{err:#}");
    }
}
