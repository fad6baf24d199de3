//! Windows are chain time (issue #43): the signer refuses `deadline_too_close` by the latest
//! block's timestamp and the contract settles by its block's. A `worker feed` given `--rpc`
//! judges windows by that clock when it is ahead of this host's, so a chain that runs ahead of
//! the wall clock (a late host clock, a development chain someone warped) does not make the
//! worker start a job the signer will refuse.
//!
//! The chain is a real Hardhat node of the test's own (the shared one at :8545 is warped by
//! nobody here), from `tools/chain` as `scripts/services.sh` installs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use verifier_sdk::fixtures::EXPIRES_AT;

use crate::example_feed::{ExampleFeed, commit, example};
use crate::feed_support::*;

/// A Hardhat node on a free loopback port, killed when dropped.
struct Node {
    child: Child,
    port: u16,
}

impl Node {
    fn start() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/chain");
        let hardhat = dir.join("node_modules/.bin/hardhat");
        assert!(
            hardhat.exists(),
            "{} is missing: run scripts/services.sh",
            hardhat.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(hardhat)
            .args([
                "node",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let node = Self { child, port };
        // Waiting for start-up only: the outcome below does not depend on how long it takes.
        for _ in 0..1200 {
            if node.try_rpc("eth_chainId", &json!([])).is_some() {
                return node;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the Hardhat node on port {port} did not answer within 120 s");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn try_rpc(&self, method: &str, params: &Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let body = serde_json::to_vec(&body).unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let head = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).ok()?;
        s.write_all(&body).ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).ok()?;
        let text = String::from_utf8_lossy(&answer);
        let (head, mut rest) = text.split_once("\r\n\r\n")?;
        // Hardhat answers `Transfer-Encoding: chunked`.
        let mut json_body = String::new();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            loop {
                let (size, after) = rest.split_once("\r\n")?;
                let size = usize::from_str_radix(size.trim(), 16).ok()?;
                if size == 0 {
                    break;
                }
                json_body.push_str(after.get(..size)?);
                rest = after.get(size + 2..)?;
            }
        } else {
            json_body.push_str(rest);
        }
        let v: Value = serde_json::from_str(&json_body).ok()?;
        v.get("result").cloned()
    }

    fn rpc(&self, method: &str, params: &Value) -> Value {
        self.try_rpc(method, params)
            .unwrap_or_else(|| panic!("{method} got no result"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The job's window ends years after this host's clock but 200 s after the chain's: by the
/// host clock it has all the time it needs, by the chain's (the signer's) it cannot settle.
/// Before: `worker feed --rpc` ran it (`completed_passed`), a candidate the signer refuses
/// `deadline_too_close`. Now: `window_too_short`, with the chain's figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_running_ahead_of_the_host_clock_decides_window_too_short() {
    let w = ExampleFeed::new(&["work", "staging", "out"]).await;
    let tree = example("source-pass");
    let top = format!("sol-1-{}", commit(1));
    let job = w.job_running(
        1,
        codeload_dir(&top, "", &tree),
        dir_digest(&tree),
        &[
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt",
        ],
    );
    assert_eq!(job["verification_expires_at"], json!(EXPIRES_AT));
    w.serve_jobs(&[&job]);

    let node = Node::start();
    node.rpc("evm_setNextBlockTimestamp", &json!([EXPIRES_AT - 200]));
    node.rpc("evm_mine", &json!([]));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.args(["feed", "--quiet", "--api", &w.server.base])
        .args(["--network", "base-mainnet", "--verifier", VERIFIER])
        .arg("--out")
        .arg(w.path("out"))
        .arg("--work-dir")
        .arg(w.path("work"))
        .arg("--staging-root")
        .arg(w.path("staging"))
        .args(["--archive-base", &w.server.base, "--json"])
        .args(["--rpc", &node.url()])
        .env_remove("GITHUB_SHA")
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{stderr}"));
    let row = report["jobs"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["job_id"] == job["job_id"]))
        .unwrap_or_else(|| panic!("no row for the job: {report}\nstderr:\n{stderr}"));
    assert_eq!(
        (row["status"].as_str(), row["reason_code"].as_str()),
        (Some("skipped"), Some("window_too_short")),
        "the job was judged on the host clock: {row}"
    );
    // The chain's figure (at most the 200 s it had when read), not the host's years.
    let reason = row["reason"].as_str().unwrap_or_default();
    let left: u64 = reason
        .split("ends in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {reason:?}"));
    assert!(left <= 200, "{reason}");
}
