//! A target description as the command-line flags that say the same, for tests that run the
//! binary against a reference server they started in-process.

use idem_check::config::TargetSpec;

/// `spec`'s URL, headers, body and where its key travels, effect basis, hold and replicas as flags, each URL passed
/// through `at` (a test that puts a proxy or a TLS front before the server rewrites the origin
/// there; the hold release stays a test hook of the server itself).
pub fn flags(spec: &TargetSpec, at: impl Fn(&str) -> String) -> Vec<String> {
    let mut args = vec![at(&spec.url)];
    for h in &spec.headers {
        args.extend(["-H".to_string(), h.clone()]);
    }
    let pairs = [
        ("-d", spec.body.clone()),
        ("--key-in-body", spec.key_in_body.clone()),
        ("--key-header", spec.key_header.clone()),
        ("--id-pointer", spec.id_pointer.clone()),
        ("--count-url", spec.count_url.as_deref().map(&at)),
        ("--count-pointer", spec.count_pointer.clone()),
        ("--hold-header", spec.hold_header.clone()),
        // The release is a test hook of the reference server, reached at its own address: a
        // held original nobody releases would run out its 10 s hold after the run and add a
        // payment to the next run's counter.
        ("--hold-release", spec.hold_release.clone()),
        (
            "--hold-at-least",
            spec.hold_at_least
                .map(|d| humantime::format_duration(d).to_string()),
        ),
    ];
    for (flag, value) in pairs {
        if let Some(v) = value {
            args.extend([flag.to_string(), v]);
        }
    }
    for replica in &spec.replicas {
        args.extend(["--replica".to_string(), at(replica)]);
    }
    args
}
