//! #45: a fleet host whose session with its database is dropped silently (no RST, no FIN: a
//! partition, a peer host gone, a stateful firewall or NAT forgetting the flow) notices
//! within a bound, and a new session works once the path is back. Before, the session had
//! no TCP user timeout and the client's two-hour keepalive idle, so a statement sent into
//! the void waited for the kernel's retransmissions to give up (`tcp_retries2` = 15: about
//! 15 minutes): the service held its loop, renewed no lease and wrote no heartbeat for that
//! long.
//!
//! Real Postgres (the test cluster) behind a plain TCP forwarder of the test's own, so the
//! drop can be aimed at one port: an nftables table of the test's own drops every packet to
//! or from the forwarder's port, as a partition does (a forwarder that merely stops copying
//! would not do: its kernel still acknowledges what the client sends and answers its
//! keepalive probes). Needs root for nftables; without it the test skips, except under
//! CI=true, where it fails. The bound is the kernel's timers, not the machine's speed: the
//! wait is event-based (the statement's answer on a channel) with 4× the setting's slack.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use test_postgres::TestDb;
use worker_serve::fleet::{Binding, FleetLedger};
use worker_serve::fleet_conn::{FleetUrl, SESSION_DEAD_WITHIN};

/// Far beyond [`SESSION_DEAD_WITHIN`], far within the kernel's default (~15 minutes).
const BOUND: Duration = Duration::from_secs(150);

fn binding() -> Binding {
    Binding {
        feed: "http://127.0.0.1:9/feed".into(),
        verifiers: vec!["0x00000000000000000000000000000000000000a1".into()],
    }
}

/// Forwards every connection to 127.0.0.1:`port` to `upstream`; returns its port.
fn forwarder(upstream: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
            }
        }
    });
    port
}

/// An nftables table of this test's own that drops every TCP packet to or from `port`;
/// removed on drop. `None` (skip) when nftables cannot be used here, unless CI=true.
struct Partition(String);

impl Partition {
    fn new(port: u16) -> Option<Self> {
        let table = format!("verifier_silent_drop_{}", std::process::id());
        let rules = format!(
            "table inet {table} {{\n chain out {{\n type filter hook output priority 0;\n \
             tcp dport {port} drop\n tcp sport {port} drop\n }}\n}}\n"
        );
        // Through sudo when not root, as GitHub's runner user runs the suite (test-root).
        let out = test_root::as_root("nft")
            .args(["-f", "-"])
            .stdin_piped(&rules);
        match out {
            Ok(()) => Some(Self(table)),
            Err(why) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "nftables is needed to drop packets silently: {why}"
                );
                eprintln!("skipped: nftables is needed to drop packets silently: {why}");
                None
            }
        }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        let _ = test_root::as_root("nft")
            .args(["delete", "table", "inet", &self.0])
            .status();
    }
}

trait StdinPiped {
    fn stdin_piped(&mut self, input: &str) -> Result<(), String>;
}

impl StdinPiped for Command {
    fn stdin_piped(&mut self, input: &str) -> Result<(), String> {
        let mut child = self
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .map_err(|e| e.to_string())?;
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

/// A statement sent on a session whose packets are silently dropped fails as a lost session
/// within the bound (not after the kernel's ~15 minutes), and once the path is back the
/// host's next session answers.
#[test]
fn fleet_statement_on_a_silently_dropped_session_fails_within_a_bound_and_the_host_reconnects() {
    let Some(db) = TestDb::new("fleet", "silent_drop") else {
        return;
    };
    let authority = db
        .url
        .split_once('@')
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(authority, _)| authority.to_owned())
        .unwrap();
    let port = forwarder(authority.clone());
    let url = FleetUrl::parse(&db.url.replacen(&authority, &format!("127.0.0.1:{port}"), 1))
        .unwrap()
        .with_password(db.password());
    let mut ledger = FleetLedger::open(&url, &binding(), "host-a").unwrap();
    ledger.view().unwrap();

    let Some(partition) = Partition::new(port) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        let result = ledger.view().map(|_| ());
        let _ = tx.send((result, started.elapsed(), ledger));
    });
    let (result, took, mut ledger) = rx.recv_timeout(BOUND).unwrap_or_else(|_| {
        panic!("a statement on a silently dropped session was still waiting after {BOUND:?}")
    });
    let error = result.expect_err("the statement answered through a partition");
    assert!(
        error.is_connection(),
        "not taken for a lost session (so not reconnected): {error}"
    );
    eprintln!(
        "the lost session was noticed after {took:?} (bound {SESSION_DEAD_WITHIN:?}): {error}"
    );

    // The path is back: the host's next session (as the store's reconnecting opens it)
    // answers.
    drop(partition);
    ledger.reconnect_if_closed().unwrap();
    ledger.view().unwrap();
}
