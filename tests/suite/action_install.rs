//! scripts/action-install, the GitHub Action's install step, against a release served from
//! 127.0.0.1 (fixtures/servers/release_assets.py). The assets are packed by
//! scripts/release-package, as the release workflow packs them, around stand-in binaries, so no
//! test builds a release; the build from source is a command that leaves a mark.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

use crate::common::python::{self, PythonServer};

const TAG: &str = "v0.1.0";
const X64: &str = "x86_64-unknown-linux-gnu";
const ARM64: &str = "aarch64-unknown-linux-gnu";
const WINDOWS: &str = "x86_64-pc-windows-msvc";
/// What the stand-in `idem-check --version` prints.
const STAND_IN_VERSION: &str = "idem-check 0.1.0 (stand-in)";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A release of `tag` with one asset per target and its SHA256SUMS, served over HTTP.
struct Release {
    dir: tempfile::TempDir,
    server: PythonServer,
}

impl Release {
    fn publish(tag: &str, targets: &[&str]) -> Release {
        let dir = tempfile::tempdir().unwrap();
        let bins = dir.path().join("bins");
        std::fs::create_dir(&bins).unwrap();
        for ext in ["", ".exe"] {
            stand_in(&bins.join(format!("idem-check{ext}")), STAND_IN_VERSION);
            stand_in(
                &bins.join(format!("idem-reference-server{ext}")),
                "idem-reference-server 0.1.0",
            );
        }
        let assets = dir.path().join("releases").join(tag);
        let mut sums = String::new();
        for target in targets {
            let archive = pack(tag, target, &bins, &assets);
            let digest = Sha256::digest(std::fs::read(&archive).unwrap());
            let name = archive.file_name().unwrap().to_str().unwrap();
            sums += &format!("{digest:x}  {name}\n");
        }
        std::fs::write(assets.join("SHA256SUMS"), sums).unwrap();
        let root = dir.path().join("releases");
        let server = python::start(
            "fixtures/servers/release_assets.py",
            &[root.to_str().unwrap()],
        );
        Release { dir, server }
    }

    fn sums(&self, tag: &str) -> PathBuf {
        self.dir
            .path()
            .join("releases")
            .join(tag)
            .join("SHA256SUMS")
    }
}

/// A shell script standing in for a binary: prints `version` for `--version`.
fn stand_in(path: &Path, version: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// scripts/release-package: the archive it wrote.
fn pack(tag: &str, target: &str, bins: &Path, out: &Path) -> PathBuf {
    let output = Command::new(repo().join("scripts/release-package"))
        .args([tag, target])
        .arg(bins)
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "release-package: {output:?}");
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// One run of the install step as the Action runs it on a `os`/`arch` runner.
struct Install<'a> {
    release: &'a Release,
    tag: &'a str,
    os: &'a str,
    arch: &'a str,
    action_path: PathBuf,
}

impl<'a> Install<'a> {
    fn new(release: &'a Release, tag: &'a str, os: &'a str, arch: &'a str) -> Self {
        Install {
            release,
            tag,
            os,
            arch,
            action_path: repo().to_path_buf(),
        }
    }

    /// Runs it into a fresh root; the outcome, the root and what the script said.
    fn run(&self) -> (Output, tempfile::TempDir, String) {
        let root = tempfile::tempdir().unwrap();
        let output = Command::new("bash")
            .arg(repo().join("scripts/action-install"))
            .env("GITHUB_ACTION_PATH", &self.action_path)
            .env("RUNNER_OS", self.os)
            .env("RUNNER_ARCH", self.arch)
            .env("IDEM_CHECK_TAG", self.tag)
            .env_remove("IDEM_CHECK_REPOSITORY")
            .env("IDEM_CHECK_RELEASE_URL", &self.release.server.base)
            .env("IDEM_CHECK_ROOT", root.path())
            .env(
                "IDEM_CHECK_BUILD_CMD",
                r#"echo built > "$IDEM_CHECK_ROOT/built-from-source""#,
            )
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        (output, root, said)
    }
}

fn built_from_source(root: &Path) -> bool {
    root.join("built-from-source").exists()
}

/// The installed idem-check's `--version`.
fn installed_version(root: &Path) -> String {
    let out = Command::new(root.join("bin/idem-check"))
        .arg("--version")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_runners_binary_is_downloaded_verified_and_runs() {
    let release = Release::publish(TAG, &[X64, ARM64]);
    for (arch, target) in [("X64", X64), ("ARM64", ARM64)] {
        let (output, root, said) = Install::new(&release, TAG, "Linux", arch).run();
        assert!(output.status.success(), "{arch}: {said}");
        assert!(
            said.contains(&format!(
                "installed {STAND_IN_VERSION} from idem-check-{TAG}-{target}.tar.gz"
            )),
            "{arch}: {said}"
        );
        assert_eq!(installed_version(root.path()), STAND_IN_VERSION);
        assert!(root.path().join("bin/idem-reference-server").is_file());
        assert!(!built_from_source(root.path()), "{arch}: {said}");
    }
}

/// Windows' asset holds `.exe` binaries, and they are what gets installed.
#[test]
fn a_windows_runner_gets_the_exe_binaries() {
    let release = Release::publish(TAG, &[X64, WINDOWS]);
    let (output, root, said) = Install::new(&release, TAG, "Windows", "X64").run();
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "installed {STAND_IN_VERSION} from idem-check-{TAG}-{WINDOWS}.tar.gz"
        )),
        "{said}"
    );
    assert!(root.path().join("bin/idem-check.exe").is_file(), "{said}");
    assert!(
        root.path().join("bin/idem-reference-server.exe").is_file(),
        "{said}"
    );
    assert!(!built_from_source(root.path()), "{said}");
}

#[test]
fn a_tampered_checksum_is_refused_and_nothing_is_installed() {
    let release = Release::publish(TAG, &[X64]);
    let sums = std::fs::read_to_string(release.sums(TAG)).unwrap();
    let first = if sums.starts_with('0') { "1" } else { "0" };
    std::fs::write(release.sums(TAG), format!("{first}{}", &sums[1..])).unwrap();
    let (output, root, said) = Install::new(&release, TAG, "Linux", "X64").run();
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "refused: idem-check-{TAG}-{X64}.tar.gz does not match release {TAG}'s SHA256SUMS"
        )) && said.contains("nothing installed"),
        "{said}"
    );
    assert!(!root.path().join("bin").exists(), "{said}");
    assert!(
        !built_from_source(root.path()),
        "a refused download is not built around: {said}"
    );
}

#[test]
fn an_asset_missing_from_its_sums_is_refused() {
    let release = Release::publish(TAG, &[X64]);
    std::fs::write(release.sums(TAG), "").unwrap();
    let (output, root, said) = Install::new(&release, TAG, "Linux", "X64").run();
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("SHA256SUMS has no line for"), "{said}");
    assert!(!root.path().join("bin").exists(), "{said}");
}

#[test]
fn without_a_fitting_binary_it_builds_from_source() {
    let release = Release::publish(TAG, &[X64]);
    let cases = [
        (
            TAG,
            "Linux",
            "ARM64",
            format!("could not download idem-check-{TAG}-{ARM64}.tar.gz from"),
        ),
        (
            "v0.9.9",
            "Linux",
            "X64",
            format!("could not download idem-check-v0.9.9-{X64}.tar.gz from"),
        ),
        (
            TAG,
            "Windows",
            "ARM64",
            "no prebuilt binary for Windows/ARM64".to_string(),
        ),
        (
            "main",
            "Linux",
            "X64",
            "the action runs from main, not a release tag".to_string(),
        ),
        (
            "",
            "Linux",
            "X64",
            "the action runs from a local checkout, not a release tag".to_string(),
        ),
    ];
    for (tag, os, arch, why) in cases {
        let (output, root, said) = Install::new(&release, tag, os, arch).run();
        assert!(output.status.success(), "{tag} {os}/{arch}: {said}");
        assert!(
            said.contains(&format!("building from source: {why}")),
            "{said}"
        );
        assert!(built_from_source(root.path()), "{tag} {os}/{arch}: {said}");
        assert!(!root.path().join("bin/idem-check").exists(), "{said}");
    }
}

/// Composite actions do not always get `github.action_ref`; the runner's checkout path of a
/// remote action, `…/_actions/OWNER/REPO/REF`, names it.
#[test]
fn the_tag_is_read_from_the_action_path_when_the_ref_is_empty() {
    let release = Release::publish(TAG, &[X64]);
    let actions = tempfile::tempdir().unwrap();
    let mut install = Install::new(&release, "", "Linux", "X64");
    install.action_path = actions.path().join("_actions/acme/idem-check").join(TAG);
    let (output, root, said) = install.run();
    assert!(output.status.success(), "{said}");
    assert_eq!(installed_version(root.path()), STAND_IN_VERSION, "{said}");
}

/// `cargo binstall idem-check` finds the asset the release workflow publishes for the crate's
/// version, and the binary inside it.
#[test]
fn binstall_metadata_names_the_released_asset() {
    let manifest: toml::Table = std::fs::read_to_string(repo().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let binstall = &manifest["package"]["metadata"]["binstall"];
    assert_eq!(binstall["pkg-fmt"].as_str(), Some("tgz"));
    let version = env!("CARGO_PKG_VERSION");
    let render = |template: &str| {
        template
            .replace("{ repo }", "https://github.com/acme/idem-check")
            .replace("{ name }", "idem-check")
            .replace("{ version }", version)
            .replace("{ target }", X64)
            .replace("{ bin }", "idem-check")
            .replace("{ binary-ext }", "")
    };
    let tag = format!("v{version}");
    let release = Release::publish(&tag, &[X64]);
    let asset = format!("idem-check-{tag}-{X64}.tar.gz");
    let assets = release.dir.path().join("releases").join(&tag);
    assert!(assets.join(&asset).is_file());
    assert_eq!(
        render(binstall["pkg-url"].as_str().unwrap()),
        format!("https://github.com/acme/idem-check/releases/download/{tag}/{asset}")
    );
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(assets.join(&asset))
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let bin = render(binstall["bin-dir"].as_str().unwrap());
    assert!(listing.lines().any(|l| l == bin), "{bin} not in {listing}");
}
