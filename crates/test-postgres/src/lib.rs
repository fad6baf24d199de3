//! Test-only: Postgres for the fleet ledger's tests (issue #45), in one place for every crate
//! that tests against it (`worker-serve`, `worker`).
//!
//! - [`TestDb`]: a database of the test's own on the cluster `scripts/services.sh` starts (its
//!   superuser-less role's URL in `.work/postgres.url`, or `$VERIFIER_TEST_POSTGRES_URL`),
//!   dropped at the end. Its URL carries no password (a command line must not): the password
//!   is in a 0600 file beside it, for `--ledger-password-file`, or given to the library.
//! - [`OwnCluster`]: a cluster of the test's own (its own port and folder, trust on loopback),
//!   so stopping it disturbs no other test; [`OwnCluster::tls_only`] serves TLS only, with a
//!   certificate of a [`TestCa`].
//!
//! Without the test cluster or postgresql-15 a test skips, except under CI=true, where it
//! fails: CI must not pass by skipping. No mock of Postgres: every helper starts or uses a
//! real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Skips (prints why, answers `None`) or, under CI=true, fails.
fn skip<T>(why: &str) -> Option<T> {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// A database of its own on the test cluster, dropped at the end.
pub struct TestDb {
    admin: String,
    name: String,
    /// Its URL, without the password.
    pub url: String,
    password: String,
    dir: tempfile::TempDir,
}

impl TestDb {
    /// A new database named after `prefix` and `test`; `None` (skip) without the test
    /// cluster, unless CI=true.
    pub fn new(prefix: &str, test: &str) -> Option<Self> {
        let admin = match std::env::var("VERIFIER_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => {
                let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.work/postgres.url");
                match std::fs::read_to_string(&file) {
                    Ok(url) => url.trim().to_owned(),
                    Err(e) => {
                        return skip(&format!(
                            "no test Postgres ({}: {e}); run scripts/services.sh",
                            file.display()
                        ));
                    }
                }
            }
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("{prefix}_{test}_{}_{nanos}", std::process::id());
        off_runtime(&admin, &format!("CREATE DATABASE \"{name}\""))
            .unwrap_or_else(|e| panic!("the test Postgres: {e}; run scripts/services.sh"));
        let (base, _) = admin.rsplit_once('/').unwrap();
        let (url, password) = without_password(&format!("{base}/{name}"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ledger.password");
        std::fs::write(&file, &password).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Some(Self {
            admin,
            name,
            url,
            password,
            dir,
        })
    }

    /// The role's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A 0600 file holding [`TestDb::password`].
    pub fn password_file(&self) -> PathBuf {
        self.dir.path().join("ledger.password")
    }

    /// Runs `sql` on the database directly (what another worker version or an operator
    /// would have written).
    pub fn exec(&self, sql: &str) {
        let url = format!("{}/{}", self.admin.rsplit_once('/').unwrap().0, self.name);
        off_runtime(&url, sql).unwrap();
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

/// `postgres://user:password@rest` split into `postgres://user@rest` and the password.
fn without_password(url: &str) -> (String, String) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    match userinfo.split_once(':') {
        Some((user, password)) => (format!("{scheme}://{user}@{host}"), password.to_owned()),
        None => (url.to_owned(), String::new()),
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

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A Postgres cluster of the test's own (its own port and folder), so stopping and starting
/// it disturbs no other test. Trust authentication on loopback: it lives for one test.
/// initdb refuses to run as root, so as root the cluster belongs to Debian's postgres account.
pub struct OwnCluster {
    dir: tempfile::TempDir,
    port: u16,
}

impl OwnCluster {
    /// A cluster speaking plain text only (`ssl = off`); `None` (skip) without postgresql-15,
    /// unless CI=true.
    pub fn new() -> Option<Self> {
        Self::start(None)
    }

    /// A cluster that accepts TLS sessions only (`hostssl` in pg_hba.conf, nothing else over
    /// TCP), its certificate issued by `ca` for the name `localhost` only.
    pub fn tls_only(ca: &TestCa) -> Option<Self> {
        Self::start(Some(ca))
    }

    fn start(tls: Option<&TestCa>) -> Option<Self> {
        if !Path::new(PG_BIN).join("initdb").exists() {
            return skip("postgresql-15 is not installed (scripts/services.sh installs it)");
        }
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Self { dir, port };
        let data = cluster.data();
        let mut conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n",
            cluster.dir.path().display()
        );
        if let Some(ca) = tls {
            let (cert, key) = (
                cluster.dir.path().join("server.crt"),
                cluster.dir.path().join("server.key"),
            );
            std::fs::copy(ca.dir.path().join("server.crt"), &cert).unwrap();
            std::fs::copy(ca.dir.path().join("server.key"), &key).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            conf.push_str(&format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                cert.display(),
                key.display()
            ));
        }
        if test_root::is_root() {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres:postgres")
                .arg(cluster.dir.path()));
        }
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
        let mut text = std::fs::read_to_string(Path::new(&data).join("postgresql.conf")).unwrap();
        text.push_str(&conf);
        std::fs::write(Path::new(&data).join("postgresql.conf"), text).unwrap();
        if tls.is_some() {
            // A plain-text session over TCP has no line to match, so the server refuses it:
            // a session that connects is encrypted.
            std::fs::write(
                Path::new(&data).join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
        }
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

    /// Its TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn pg(&self, args: &[&str]) {
        run(&mut pg_command(args));
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
        let _ = pg_command(&["pg_ctl", "-D", &data, "-m", "immediate", "-w", "stop"]).output();
    }
}

/// The Postgres program `args[0]` with the rest of `args`, as the cluster's owner.
fn pg_command(args: &[&str]) -> Command {
    let bin = Path::new(PG_BIN).join(args[0]);
    let mut cmd = if test_root::is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(&args[1..]);
    cmd
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// A throw-away certificate authority (openssl) and a server certificate it issued for the
/// name `localhost` only (no IP address), so connecting to 127.0.0.1 by address is a wrong
/// host name.
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// A new CA and its server certificate.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let openssl = |args: &[&str]| run(Command::new("openssl").args(args));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &at("ca.key"),
            "-out",
            &at("ca.crt"),
            "-days",
            "2",
            "-subj",
            "/CN=verifier test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &at("server.key"),
            "-out",
            &at("server.csr"),
            "-subj",
            "/CN=localhost",
        ]);
        std::fs::write(
            at("server.ext"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            &at("server.csr"),
            "-CA",
            &at("ca.crt"),
            "-CAkey",
            &at("ca.key"),
            "-CAcreateserial",
            "-out",
            &at("server.crt"),
            "-days",
            "2",
            "-extfile",
            &at("server.ext"),
        ]);
        Self { dir }
    }

    /// The CA's certificate (PEM), for `sslrootcert=`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
