//! A throwaway PostgreSQL cluster for tests: `initdb` in a temporary folder, `postgres` on a
//! free loopback port with its unix socket in that folder too. The tests of one process share
//! one cluster, each in a database of its own, stopped when the process ends (also when a test
//! panics); a test that crashes its database starts a cluster of its own.
//!
//! PostgreSQL refuses to run as root, so when the tests do (CI does), every PostgreSQL command
//! runs as `nobody` through `runuser`, and the folder belongs to `nobody`.
//!
//! There is no fallback: without PostgreSQL binaries the tests that need them fail, saying how
//! to install them. CI installs them.

#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The superuser `initdb` creates; the cluster trusts loopback connections.
const SUPERUSER: &str = "postgres";

/// The unprivileged account PostgreSQL runs as when the tests run as root.
const UNPRIVILEGED: &str = "nobody";

/// A running cluster.
#[derive(Debug)]
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_nobody: bool,
    databases: AtomicUsize,
    /// Whether the server syncs its writes to disk.
    fsync: bool,
    /// The watchdog shell, whose stdin pipe stays open as long as this process lives (see
    /// [`PgCluster::stop_when_process_ends`]).
    watchdog: Option<Child>,
}

/// The cluster every test of this process shares, started by the first one that asks.
///
/// It lives as long as the process. Stopping it whenever no test happened to hold it made the
/// next test pay `initdb` and a start again, seconds each, many times per binary. A static is
/// never dropped, so [`PgCluster::stop_when_process_ends`] stops it and removes its folder
/// once the test process is gone, however it ended.
pub fn shared() -> &'static PgCluster {
    static SHARED: OnceLock<PgCluster> = OnceLock::new();
    SHARED.get_or_init(|| {
        let mut cluster = PgCluster::start();
        cluster.stop_when_process_ends();
        cluster
    })
}

/// The folder of PostgreSQL's server binaries: `PG_BIN` if set, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian's layout), else the folder of `pg_ctl` on `PATH`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|dir| dir.join("pg_ctl").exists() && dir.join("initdb").exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "PostgreSQL server binaries not found (looked in PG_BIN, /usr/lib/postgresql/*/bin \
             and PATH): install them, e.g. `apt-get install postgresql` (.ci/run does)"
        )
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl PgCluster {
    /// `initdb` and start a new cluster for tests; panics with PostgreSQL's output if either
    /// fails.
    pub fn start() -> Self {
        Self::start_with_fsync(false)
    }

    /// A cluster with PostgreSQL's default durability (`fsync=on`), for benchmarks whose
    /// commits must cost what they cost in production.
    pub fn start_durable() -> Self {
        Self::start_with_fsync(true)
    }

    fn start_with_fsync(fsync: bool) -> Self {
        let bin = bin_dir();
        let dir = tempfile::tempdir().expect("a temporary folder for PostgreSQL");
        let as_nobody = running_as_root();
        if as_nobody {
            let status = Command::new("chown")
                .arg(UNPRIVILEGED)
                .arg(dir.path())
                .status()
                .expect("run chown");
            assert!(status.success(), "chown {UNPRIVILEGED} failed");
        }
        let cluster = Self {
            port: free_port(),
            dir,
            bin,
            as_nobody,
            databases: AtomicUsize::new(0),
            watchdog: None,
            fsync,
        };
        let data = cluster.data_dir();
        cluster.run_ok(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                SUPERUSER.as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
            ],
        );
        cluster.pg_ctl_start();
        cluster
    }

    /// Starts a shell that waits for the end of a pipe only this process holds (the kernel
    /// closes it when the process ends, even on a panic, a signal or `process::exit`), then
    /// stops the cluster and removes its folder. It ignores Ctrl-C, which reaches the whole
    /// process group, so that it outlives the tests it cleans up after.
    fn stop_when_process_ends(&mut self) {
        let mut stop = self.command("pg_ctl");
        stop.arg("stop")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w"]);
        let mut argv = vec![stop.get_program().to_owned()];
        argv.extend(stop.get_args().map(ToOwned::to_owned));
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' INT TERM HUP; cat >/dev/null; dir=$1; shift; "$@" >/dev/null 2>&1; rm -rf "$dir""#)
            .arg("pg-watchdog")
            .arg(self.dir.path())
            .args(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the PostgreSQL watchdog shell");
        self.watchdog = Some(child);
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_nobody {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", UNPRIVILEGED, "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Output {
        self.command(program)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("could not run {program}: {e}"))
    }

    fn run_ok(&self, program: &str, args: &[&std::ffi::OsStr]) {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl(&self, action: &str, extra: &[&str]) -> Output {
        let data = self.data_dir();
        let log = self.dir.path().join("postgres.log");
        // Tests run with fsync=off: every crash they cause is the server process's (`-m
        // immediate`, kill -9), never the machine's, and the kernel keeps what a dead process
        // wrote; a commit is still written to the WAL before it is acknowledged.
        // Every test shares this cluster, and every reference server opens its whole pool (16
        // connections) at start, two or three of them for the replica tests: with ten tests at
        // a time (.cargo/config.toml) 200 connections ran out ("too many clients already").
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} \
             -c max_connections=1000 -c synchronous_commit=on -c fsync={}",
            self.port,
            self.dir.path().display(),
            if self.fsync { "on" } else { "off" }
        );
        let mut args: Vec<&std::ffi::OsStr> = vec![
            action.as_ref(),
            "-D".as_ref(),
            data.as_os_str(),
            "-l".as_ref(),
            log.as_os_str(),
            "-w".as_ref(),
            "-t".as_ref(),
            "30".as_ref(),
            "-o".as_ref(),
            options.as_ref(),
        ];
        args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
        self.run("pg_ctl", &args)
    }

    fn pg_ctl_start(&self) {
        let out = self.pg_ctl("start", &[]);
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}\nlog: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
        );
    }

    /// Stops the server the way a crash would (`-m immediate`: no checkpoint, no goodbye to the
    /// clients) and leaves it down.
    pub fn crash(&self) {
        let out = self.pg_ctl("stop", &["-m", "immediate"]);
        assert!(out.status.success(), "pg_ctl stop -m immediate failed");
    }

    /// Starts the server again after [`PgCluster::crash`] (it recovers from its WAL).
    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    /// Runs a client program (`createdb`, `psql`, `pg_isready`) against the cluster as the
    /// superuser, with `args` after the connection options.
    fn client(&self, program: &str, args: &[&str]) -> Output {
        let port = self.port.to_string();
        let mut all: Vec<&std::ffi::OsStr> = ["-h", "127.0.0.1", "-p", &port, "-U", SUPERUSER]
            .into_iter()
            .map(std::ffi::OsStr::new)
            .collect();
        all.extend(args.iter().map(std::ffi::OsStr::new));
        self.run(program, &all)
    }

    /// A new, empty database; returns its URL.
    pub fn create_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let name = format!("test_{}_{n}", std::process::id());
        let out = self.client("createdb", &[&name]);
        assert!(
            out.status.success(),
            "createdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs `sql` in database `url` and returns each row as its columns joined by `|`.
    pub fn query(&self, url: &str, sql: &str) -> Vec<String> {
        let name = url.rsplit('/').next().unwrap_or_default();
        let out = self.client(
            "psql",
            &["-d", name, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
        );
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits until the server accepts connections again (bounded).
    pub fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.client("pg_isready", &[]).status.success() {
            assert!(Instant::now() < deadline, "PostgreSQL did not come back");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let out = self.pg_ctl("stop", &["-m", "immediate"]);
        if !out.status.success() {
            eprintln!(
                "stopping the test PostgreSQL cluster failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
