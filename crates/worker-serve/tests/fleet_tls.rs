//! The fleet ledger's link to its database over TLS (issue #45), against real Postgres
//! clusters of the tests' own: one that accepts TLS sessions only (a plain-text session has
//! no pg_hba line, so a session that opens is encrypted), its certificate issued by a
//! throw-away CA for the name `localhost` only; and one without TLS. A URL that asks for TLS
//! either gets it, verified, or no session at all: never plain text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use test_postgres::{OwnCluster, TestCa};
use worker_serve::fleet::{Binding, FleetError, FleetLedger};
use worker_serve::fleet_conn::FleetUrl;

fn binding() -> Binding {
    Binding {
        feed: "http://127.0.0.1:9/feed".into(),
        verifiers: vec!["0x00000000000000000000000000000000000000a1".into()],
    }
}

/// The cluster's superuser at `host` (the name checked against the certificate), reached at
/// 127.0.0.1 whatever the name.
fn url(cluster: &OwnCluster, host: &str, query: &str) -> String {
    format!(
        "postgres://postgres@{host}:{}/postgres?hostaddr=127.0.0.1&connect_timeout=10&{query}",
        cluster.port()
    )
}

fn open(url: &str) -> Result<FleetLedger, FleetError> {
    let url = FleetUrl::parse(url)?;
    std::thread::spawn(move || FleetLedger::open(&url, &binding(), "host-tls"))
        .join()
        .unwrap()
}

#[test]
fn fleet_tls_verify_full_with_the_right_ca_connects_encrypted() {
    let ca = TestCa::new();
    let Some(cluster) = OwnCluster::tls_only(&ca) else {
        return;
    };
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = url(
            &cluster,
            "localhost",
            &format!("sslmode={mode}&sslrootcert={}", ca.ca_file().display()),
        );
        let mut ledger = open(&url).unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        ledger.view().unwrap();
    }
}

#[test]
fn fleet_tls_a_server_certificate_of_another_ca_is_refused() {
    let (ca, other) = (TestCa::new(), TestCa::new());
    let Some(cluster) = OwnCluster::tls_only(&ca) else {
        return;
    };
    for mode in ["verify-full", "require"] {
        let url = url(
            &cluster,
            "localhost",
            &format!("sslmode={mode}&sslrootcert={}", other.ca_file().display()),
        );
        let err = open(&url).unwrap_err();
        assert!(
            err.to_string().contains("certificate"),
            "sslmode={mode}: {err}"
        );
    }
}

#[test]
fn fleet_tls_a_server_certificate_for_another_host_name_is_refused() {
    let ca = TestCa::new();
    let Some(cluster) = OwnCluster::tls_only(&ca) else {
        return;
    };
    // The certificate names localhost only.
    let url = url(
        &cluster,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", ca.ca_file().display()),
    );
    let err = open(&url).unwrap_err();
    assert!(err.to_string().contains("not valid for name"), "{err}");
    assert!(err.is_permanent(), "the configuration's to fix (78): {err}");
}

#[test]
fn fleet_tls_asked_for_against_a_server_without_tls_is_refused_never_plain_text() {
    let ca = TestCa::new();
    let Some(cluster) = OwnCluster::new() else {
        return;
    };
    for mode in ["verify-full", "require"] {
        let url = url(
            &cluster,
            "localhost",
            &format!("sslmode={mode}&sslrootcert={}", ca.ca_file().display()),
        );
        let err = open(&url).unwrap_err();
        assert!(err.to_string().contains("TLS"), "sslmode={mode}: {err}");
    }
    // The same server in plain text, asked for plain text, answers: the refusal above is the
    // missing TLS, not the server.
    open(&url(&cluster, "localhost", "sslmode=disable")).unwrap();
}
