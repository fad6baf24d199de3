//! A database of its own on the test Postgres cluster (`scripts/services.sh`; its URL in
//! `.work/postgres.url`, or `$VERIFIER_TEST_POSTGRES_URL`), for the serve tests that run
//! against both ledgers (issue #45). Without the cluster: skip, except under CI=true, where
//! it fails.
#![allow(dead_code)]

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The database, dropped at the end.
pub struct TestDb {
    admin: String,
    name: String,
    /// Its URL.
    pub url: String,
}

impl TestDb {
    /// `None` (skip) without the test cluster, unless CI=true.
    pub fn new(test: &str) -> Option<Self> {
        let admin = match std::env::var("VERIFIER_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => {
                let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.work/postgres.url");
                match std::fs::read_to_string(&file) {
                    Ok(url) => url.trim().to_owned(),
                    Err(e) => {
                        assert!(
                            std::env::var("CI").as_deref() != Ok("true"),
                            "no test Postgres ({}: {e}); run scripts/services.sh",
                            file.display()
                        );
                        eprintln!("skipped: no test Postgres (run scripts/services.sh)");
                        return None;
                    }
                }
            }
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("serve_{test}_{}_{nanos}", std::process::id());
        off_runtime(&admin, &format!("CREATE DATABASE \"{name}\""))
            .unwrap_or_else(|e| panic!("the test Postgres: {e}; run scripts/services.sh"));
        let (base, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        Some(Self { admin, name, url })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = off_runtime(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        );
    }
}

/// Runs `sql` at `url` on a thread of its own: the blocking client starts a runtime, which
/// a test's async body may not.
fn off_runtime(url: &str, sql: &str) -> Result<(), String> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client =
            postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        client.batch_execute(&sql).map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "the client thread panicked".to_owned())?
}

/// A Postgres cluster of the test's own (its own port and folder), so stopping and starting
/// it disturbs no other test. Trust authentication on loopback: it lives for one test.
/// initdb refuses to run as root, so as root the cluster belongs to Debian's postgres account.
pub struct OwnCluster {
    dir: tempfile::TempDir,
    port: u16,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

impl OwnCluster {
    /// `None` (skip) without postgresql-15, unless CI=true.
    pub fn new() -> Option<Self> {
        if !Path::new(PG_BIN).join("initdb").exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "postgresql-15 is not installed (scripts/services.sh installs it)"
            );
            eprintln!("skipped: postgresql-15 is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            run(std::process::Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path()));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Self { dir, port };
        let data = cluster.data();
        cluster.pg(&[
            "initdb",
            "-D",
            &data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ]);
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\n",
            cluster.port,
            cluster.dir.path().display()
        );
        let mut text = std::fs::read_to_string(Path::new(&data).join("postgresql.conf")).unwrap();
        text.push_str(&conf);
        std::fs::write(Path::new(&data).join("postgresql.conf"), text).unwrap();
        cluster.pg_ctl("start");
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// The superuser's URL (trust on loopback).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn pg(&self, args: &[&str]) {
        let bin = Path::new(PG_BIN).join(args[0]);
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            std::process::Command::new(bin)
        };
        run(cmd.args(&args[1..]));
    }

    /// `pg_ctl ACTION` (start, stop, restart), waiting for it to finish.
    pub fn pg_ctl(&self, action: &str) {
        let log = self.dir.path().join("server.log").display().to_string();
        let data = self.data();
        self.pg(&[
            "pg_ctl", "-D", &data, "-l", &log, "-w", "-t", "60", "-m", "fast", action,
        ]);
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let data = self.data();
        let bin = Path::new(PG_BIN).join("pg_ctl");
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            std::process::Command::new(bin)
        };
        let _ = cmd
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
        .unwrap()
}

fn run(cmd: &mut std::process::Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}
