//! Design APIs built on Stripe's SDK (fixtures/provider_sdks/stripe_api.*), a correct one and
//! one per classic defect, each with its whole `downstream` verdict table, run through the
//! binary with the fake on `--provider-listen`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::{fixture, interpreter, sdks};
use crate::common;

/// A design API of fixtures/provider_sdks/ built on Stripe's SDK, with the (probe, check)
/// pairs its defect must fail; every other downstream probe must PASS, except the two that
/// need a restart hook on a Node design, which keeps its claims in memory and is run without
/// one (they SKIP naming --restart-cmd). The Python designs keep theirs in SQLite and are
/// restarted for real.
struct Design {
    name: &'static str,
    script: &'static str,
    args: &'static [&'static str],
    fails: &'static [(&'static str, &'static str)],
}

const NEEDS_RESTART: [&str; 2] = ["prov-crash-after-call", "prov-restart-replay"];

/// The longest one checker run may take.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A Python design started through a launch script that records the running instance's pid,
/// with a restart script for `--restart-cmd`: it stops that instance, waits until it no longer
/// answers, and launches another on the same port and database (retrying while the port is not
/// yet free). Dropped, it stops the instance running then.
struct Restartable {
    dir: tempfile::TempDir,
    port: u16,
}

impl Restartable {
    fn new(python: &Path, script: &Path, provider: &str, args: &[&str]) -> Restartable {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::common::port::unused();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let launch = format!(
            "echo $$ > '{pid}'\nexec '{python}' '{script}' {port} --db '{db}' --provider-url '{provider}' --lifetime 300 {args}\n",
            pid = at("api.pid"),
            python = python.display(),
            script = script.display(),
            db = at("claims.sqlite"),
            args = quoted.join(" "),
        );
        let restart = format!(
            "kill \"$(cat '{pid}')\"\nn=0\nwhile curl -sf -o /dev/null 'http://127.0.0.1:{port}/ready' && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n(n=0; until sh '{launch}'; do n=$((n+1)); [ $n -ge 100 ] && exit 1; sleep 0.1; done) </dev/null >/dev/null 2>&1 &\n",
            pid = at("api.pid"),
            launch = at("launch.sh"),
        );
        std::fs::write(at("launch.sh"), launch).unwrap();
        std::fs::write(at("restart.sh"), restart).unwrap();
        Restartable { dir, port }
    }

    fn launch(&self) -> std::process::Command {
        let mut c = std::process::Command::new("sh");
        c.arg(self.dir.path().join("launch.sh"));
        c
    }

    fn restart_cmd(&self) -> String {
        format!("sh '{}'", self.dir.path().join("restart.sh").display())
    }

    fn ready_url(&self) -> String {
        format!("http://127.0.0.1:{}/ready", self.port)
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("api.pid")) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// Starts `design` pointed at the fake on a free port, runs the downstream probes against it
/// with the fake playing `stripe` there (a Python design restartable through
/// `--restart-cmd`), and returns the JSON report.
fn run_design(dir: &Path, design: &Design) -> Value {
    let port = crate::common::port::unused();
    let provider = format!("http://127.0.0.1:{port}");
    let restartable = design.script.ends_with(".py").then(|| {
        let python = dir.join("venv/bin/python");
        Restartable::new(&python, &fixture(design.script), &provider, design.args)
    });
    let command = match &restartable {
        Some(r) => r.launch(),
        None => {
            let mut c = interpreter(dir, design.script);
            c.args(["--provider-url", &provider, "--lifetime", "300"])
                .args(design.args);
            c
        }
    };
    let api = common::python::start_command(command, design.name);
    let restart: Vec<String> = match &restartable {
        Some(r) => vec![
            "--restart-cmd".into(),
            r.restart_cmd(),
            "--ready-url".into(),
            r.ready_url(),
        ],
        None => Vec::new(),
    };
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("report.json");
    let mut child = common::binary::bin()
        .arg("run")
        .arg(format!("{}/payments", api.base))
        .args([
            "-H",
            "Authorization: Bearer ta",
            "-H",
            "Content-Type: application/json",
        ])
        .args([
            "-d",
            r#"{"amount":1250,"currency":"EUR","reference":"{{unique}}"}"#,
        ])
        .args(["--tenant-b-header", "Authorization: Bearer tb"])
        .arg("--second-url")
        .arg(format!("{}/payouts", api.base))
        .args(["--provider-listen", &format!("127.0.0.1:{port}")])
        .args(["--provider", "stripe", "--probe", "downstream"])
        .args(&restart)
        // The designs' SDK gives up on an attempt after 2 s and retries twice: one client
        // request may take 8 s before the API answers 503.
        .args(["--timeout", "15s", "--color", "never", "--report-json"])
        .arg(&report)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    common::binary::wait_bounded(&mut child, RUN_LIMIT);
    let text = std::fs::read_to_string(&report).expect("a JSON report");
    serde_json::from_str(&text).unwrap()
}

/// Runs `design` and checks its whole downstream table; returns its row.
fn design_table(dir: &Path, design: &Design) -> String {
    let report = run_design(dir, design);
    let outcomes: std::collections::BTreeMap<String, String> =
        common::json_report::probe_outcomes(&report);
    let failed: std::collections::BTreeSet<(String, String)> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let id = p["id"].as_str().unwrap().to_string();
            p["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["passed"] == false && c["severity"] != "info")
                .map(move |c| (id.clone(), c["id"].as_str().unwrap().to_string()))
        })
        .collect();
    let row = format!("{}: {outcomes:?}", design.name);
    println!("{row}");
    let want_failed: std::collections::BTreeSet<(String, String)> = design
        .fails
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    assert_eq!(failed, want_failed, "{row}");
    let downstream = idem_check::probes::catalog()
        .into_iter()
        .filter(|d| d.meta.group == idem_check::probes::Group::Downstream)
        .map(|d| d.meta.id);
    for id in downstream {
        let want = if NEEDS_RESTART.contains(&id) && !design.script.ends_with(".py") {
            "SKIP"
        } else if design.fails.iter().any(|(p, _)| *p == id) {
            "FAIL"
        } else {
            "PASS"
        };
        assert_eq!(
            outcomes.get(id).map(String::as_str),
            Some(want),
            "{id}\n{row}"
        );
    }
    row
}

macro_rules! design_tables {
    ($($test:ident => $design:expr;)*) => {
        $(
            #[test]
            fn $test() {
                let Some(dir) = sdks() else { return };
                design_table(&dir, &$design);
            }
        )*
    };
}

design_tables! {
    design_python_correct => Design {
        name: "stripe_api.py", script: "stripe_api.py", args: &[], fails: &[],
    };
    // Tenant B's charge under A's client key replays A's at the provider (both tenants use
    // one provider account), and a payout under a payment's key is refused by the provider's
    // parameter check, so the payout never happens.
    design_python_raw_client_key => Design {
        name: "stripe_api.py --defect raw-client-key",
        script: "stripe_api.py",
        args: &["--defect", "raw-client-key"],
        fails: &[
            ("prov-tenant-scope", "distinct-keys"),
            ("prov-tenant-scope", "two-charges"),
            ("prov-operation-scope", "distinct-keys"),
            ("prov-operation-scope", "both-effects"),
        ],
    };
    // Within one process every attempt carries the claim's key; after the restart the
    // retry of the unknown outcome carries a new one, and the committed charge is made again.
    design_python_key_in_memory => Design {
        name: "stripe_api.py --defect key-in-memory",
        script: "stripe_api.py",
        args: &["--defect", "key-in-memory"],
        fails: &[
            ("prov-crash-after-call", "pre-crash-key"),
            ("prov-crash-after-call", "one-charge"),
        ],
    };
    design_node_correct => Design {
        name: "stripe_api.mjs", script: "stripe_api.mjs", args: &[], fails: &[],
    };
    // The SDK's own key holds across its own retries of one call only: every client retry
    // after the SDK gave up is a new create call with a new key, and the charge committed
    // behind the lost answer is made again.
    design_node_sdk_key => Design {
        name: "stripe_api.mjs --defect sdk-key",
        script: "stripe_api.mjs",
        args: &["--defect", "sdk-key"],
        fails: &[
            ("prov-same-key-on-provider-retry", "same-key"),
            ("prov-lost-provider-response", "original-key"),
            ("prov-lost-provider-response", "one-charge"),
            ("prov-lost-provider-response", "resolved"),
        ],
    };
}
