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
