//! Test-only: shared pieces of the feed tests: canned routes on the shared loopback HTTP server
//! (`test-http`), raw tar.gz builders that can write any (hostile) entry, and fixture jobs whose
//! committed digests match trees built here.
//!
//! A crate rather than a test module because the tests that use it live in several crates (the
//! worker's own, and those of `platform-client`, `worker-store` and `worker-serve`, which test
//! those libraries without the worker binary), and the worker's `bench_feed` example serves
//! its feed with it too. It ships in no binary and holds no logic of the code under test: it
//! builds inputs, it never checks outputs.
// Test scaffolding: a failure here should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::Value;
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};
use verifier_sdk::{Sha256Digest, TreeLimits, digest_directory};

/// One canned HTTP response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Send `Content-Length` (otherwise the body is delimited by closing the connection).
    pub content_length: bool,
    /// Accept the request and never answer.
    pub stall: bool,
}

impl Reply {
    pub fn ok(body: Vec<u8>) -> Self {
        Self {
            status: 200,
            headers: vec![],
            body,
            content_length: true,
            stall: false,
        }
    }
    pub fn json(v: &Value) -> Self {
        Self::ok(serde_json::to_vec(v).unwrap())
    }
    pub fn status(status: u16) -> Self {
        Self {
            status,
            ..Self::ok(Vec::new())
        }
    }
    pub fn redirect(location: &str) -> Self {
        Self {
            headers: vec![("Location".into(), location.into())],
            ..Self::status(302)
        }
    }
}

/// A real HTTP server on 127.0.0.1 (the shared `test-http` server) serving canned replies by
/// exact path-and-query, counting the requests per target.
#[derive(Clone)]
pub struct TestServer {
    pub base: String,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

impl TestServer {
    pub async fn start() -> Self {
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let (served, counted) = (routes.clone(), hits.clone());
        let base = test_http::serve(move |request| {
            let target = request.target().to_owned();
            *counted.lock().unwrap().entry(target.clone()).or_default() += 1;
            let reply = served
                .lock()
                .unwrap()
                .get(&target)
                .cloned()
                .unwrap_or_else(|| Reply::status(404));
            async move {
                if reply.stall {
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                    return None;
                }
                let mut response = test_http::Response::status(reply.status);
                response.headers = reply.headers;
                response.body = reply.body;
                response.content_length = reply.content_length;
                Some(response)
            }
        })
        .await
        .unwrap();
        Self { base, routes, hits }
    }

    pub fn route(&self, path_and_query: &str, reply: Reply) {
        self.routes
            .lock()
            .unwrap()
            .insert(path_and_query.into(), reply);
    }

    pub fn hits(&self, path_and_query: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .get(path_and_query)
            .copied()
            .unwrap_or(0)
    }
}

/// A tar entry, written with raw header fields so hostile names survive.
#[derive(Clone, Debug)]
pub enum Entry {
    File {
        path: String,
        data: Vec<u8>,
        mode: u32,
    },
    Dir {
        path: String,
    },
    Symlink {
        path: String,
        target: String,
    },
    HardLink {
        path: String,
        target: String,
    },
    Fifo {
        path: String,
    },
    /// A pax global header as codeload writes first.
    GlobalHeader {
        comment: String,
    },
    /// A file whose name bytes are not UTF-8.
    RawName {
        name: Vec<u8>,
        data: Vec<u8>,
    },
    /// A file whose real name comes from a pax extended header (overriding `name`).
    PaxFile {
        name: String,
        pax_path: String,
        data: Vec<u8>,
    },
}

fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    // The length prefix counts itself.
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    format!("{len}{body}").into_bytes()
}

pub fn file(path: &str, data: &[u8]) -> Entry {
    Entry::File {
        path: path.into(),
        data: data.to_vec(),
        mode: 0o644,
    }
}

pub fn dir(path: &str) -> Entry {
    Entry::Dir { path: path.into() }
}

fn header(name: &[u8], kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    assert!(name.len() <= 100, "test names must fit the v7 name field");
    {
        let gnu = h.as_gnu_mut().unwrap();
        gnu.name[..name.len()].copy_from_slice(name);
    }
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h
}

fn with_link(mut h: tar::Header, target: &str) -> tar::Header {
    let gnu = h.as_gnu_mut().unwrap();
    gnu.linkname[..target.len()].copy_from_slice(target.as_bytes());
    h
}

/// The uncompressed tar stream of `entries`.
pub fn tar_bytes(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let (mut h, data): (tar::Header, Vec<u8>) = match e {
            Entry::File { path, data, mode } => (
                header(
                    path.as_bytes(),
                    tar::EntryType::Regular,
                    data.len() as u64,
                    *mode,
                ),
                data.clone(),
            ),
            Entry::Dir { path } => (
                header(path.as_bytes(), tar::EntryType::Directory, 0, 0o755),
                vec![],
            ),
            Entry::Symlink { path, target } => (
                with_link(
                    header(path.as_bytes(), tar::EntryType::Symlink, 0, 0o777),
                    target,
                ),
                vec![],
            ),
            Entry::HardLink { path, target } => (
                with_link(
                    header(path.as_bytes(), tar::EntryType::Link, 0, 0o644),
                    target,
                ),
                vec![],
            ),
            Entry::Fifo { path } => (
                header(path.as_bytes(), tar::EntryType::Fifo, 0, 0o644),
                vec![],
            ),
            Entry::GlobalHeader { comment } => {
                let line = pax_record("comment", comment);
                (
                    header(
                        b"pax_global_header",
                        tar::EntryType::XGlobalHeader,
                        line.len() as u64,
                        0o666,
                    ),
                    line,
                )
            }
            Entry::PaxFile {
                name,
                pax_path,
                data,
            } => {
                let record = pax_record("path", pax_path);
                let mut x = header(
                    b"PaxHeaders/x",
                    tar::EntryType::XHeader,
                    record.len() as u64,
                    0o644,
                );
                x.set_cksum();
                b.append(&x, record.as_slice()).unwrap();
                (
                    header(
                        name.as_bytes(),
                        tar::EntryType::Regular,
                        data.len() as u64,
                        0o644,
                    ),
                    data.clone(),
                )
            }
            Entry::RawName { name, data } => (
                header(name, tar::EntryType::Regular, data.len() as u64, 0o644),
                data.clone(),
            ),
        };
        h.set_cksum();
        b.append(&h, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap()
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

pub fn tar_gz(entries: &[Entry]) -> Vec<u8> {
    gzip(&tar_bytes(entries))
}

/// Writes `h` (its path and type set by the caller) announcing `size` bytes of zeros, then
/// those zeros, to `out`, unpadded: 1 MiB at a time, so an archive bomb's test never holds
/// its body.
pub fn write_zeros_entry(out: &mut impl std::io::Write, mut h: tar::Header, size: u64) {
    h.set_size(size);
    h.set_mode(0o644);
    h.set_cksum();
    out.write_all(h.as_bytes()).unwrap();
    let chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64);
        out.write_all(&chunk[..usize::try_from(n).unwrap()])
            .unwrap();
        left -= n;
    }
}

/// A codeload-style archive: pax global header, `<top>/` folder, then `files` under it.
pub fn codeload(top: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut entries = vec![
        Entry::GlobalHeader {
            comment: "0123456789abcdef0123456789abcdef01234567".into(),
        },
        dir(&format!("{top}/")),
    ];
    for (path, data) in files {
        entries.push(file(&format!("{top}/{path}"), data));
    }
    tar_gz(&entries)
}

/// The digest of a tree made of `files` (written to a scratch dir and digested by the sdk's
/// reference walk, so the tests never restate the digest algorithm).
pub fn tree_digest(files: &[(&str, &[u8])]) -> Sha256Digest {
    let dir = tempfile::tempdir().unwrap();
    for (path, data) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    digest_directory(dir.path(), TreeLimits::new(1 << 30, 100_000).unwrap())
        .unwrap()
        .digest
}

pub fn dir_digest(path: &Path) -> Sha256Digest {
    digest_directory(path, TreeLimits::new(1 << 30, 100_000).unwrap())
        .unwrap()
        .digest
}

/// The executor label of [`double_evidence`]'s records.
pub const TEST_DOUBLE: &str = "test-double";

/// An evidence record for `job` shaped as the Docker executor's but labelled
/// [`TEST_DOUBLE`], so that no signer accepts a candidate carrying it: what a test double of
/// the job executor seals with its fabricated verdict.
pub fn double_evidence(job: &verifier_sdk::ValidatedJob) -> verifier_sdk::evidence::EvidenceRecord {
    let facts = verifier_sdk::ExecutionFacts {
        exit_code: 0,
        stdout_sha256: Sha256Digest::from_bytes([1; 32]),
        stderr_sha256: Sha256Digest::from_bytes([2; 32]),
        stdout_bytes: 0,
        stderr_bytes: 0,
    };
    let (_, value) = verifier_sdk::fixtures::completed_run(job, facts);
    let mut record = verifier_sdk::evidence::EvidenceRecord::from_docker_value(&value).unwrap();
    record.executor = TEST_DOUBLE.into();
    record
}

/// A readiness record for `job_id` in which every check passed: what an earlier run may have
/// left at the job's path, for a test to see it replaced.
pub fn ready_record(job_id: &str) -> verifier_sdk::readiness::ReadinessRecord {
    let record = verifier_sdk::readiness::ReadinessRecord::new(
        job_id,
        1,
        verifier_sdk::readiness::ALL_CHECKS
            .iter()
            .map(|k| verifier_sdk::readiness::CheckResult::pass(*k))
            .collect(),
    );
    assert!(record.ready);
    record
}

/// The readiness record of `job_id` in the output directory `out`.
pub fn read_readiness(out: &Path, job_id: &str) -> verifier_sdk::readiness::ReadinessRecord {
    let name = verifier_sdk::readiness::readiness_file_name(job_id);
    verifier_sdk::readiness::ReadinessRecord::parse(&std::fs::read(out.join(name)).unwrap())
        .unwrap()
}

/// Asserts that `record` is the one written for a job that was not run: not ready, every
/// check present and `not_checked`, each message naming every one of `why`.
pub fn assert_not_run(record: &verifier_sdk::readiness::ReadinessRecord, why: &[&str]) {
    assert!(!record.ready, "{record:?}");
    assert_eq!(
        record.checks.len(),
        verifier_sdk::readiness::ALL_CHECKS.len()
    );
    for c in &record.checks {
        assert_eq!(
            c.code.as_deref(),
            Some(verifier_sdk::readiness::NOT_CHECKED)
        );
        let m = c.message.as_deref().unwrap_or_default();
        for part in why {
            assert!(m.contains(part), "no {part:?} in {m}");
        }
    }
}

/// The fixture's verifier.
pub const VERIFIER: &str = "0xbe6292b9e465f549e2363b918d6dd9187038431e";
/// Another verifier, never configured.
pub const OTHER_VERIFIER: &str = "0x2222222222222222222222222222222222222222";

/// Jobs-feed path for `verifier` on base-mainnet.
pub fn feed_path(verifier: &str) -> String {
    format!(
        "/v1/base/autonomous-bounties/verification-jobs?network=base-mainnet&verifier={verifier}"
    )
}

/// A valid job for round `round` whose source is `solver-org/<repo>@<commit>` committed to
/// `source_digest`, and whose benchmark commits to `benchmark_digest`.
pub fn job(
    round: u64,
    repo: &str,
    commit: &str,
    source_digest: Sha256Digest,
    benchmark_digest: Sha256Digest,
) -> Value {
    let mut manifest = sample_manifest();
    manifest["benchmark_digest"] = Value::String(benchmark_digest.to_string());
    job_value(&JobParams {
        round,
        artifact_reference: format!("https://github.com/solver-org/{repo}/commit/{commit}"),
        source_snapshot_digest: source_digest.to_string(),
        manifest,
        ..JobParams::default()
    })
}

/// Every regular file under `dir` as (path relative to `dir`, bytes), in path order.
pub fn read_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A codeload-style archive of the tree at `dir`, placed at `<top>/<prefix>` (`prefix` empty
/// or ending in `/`).
pub fn codeload_dir(top: &str, prefix: &str, dir: &Path) -> Vec<u8> {
    let files: Vec<(String, Vec<u8>)> = read_tree(dir)
        .into_iter()
        .map(|(path, data)| (format!("{prefix}{path}"), data))
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    codeload(top, &borrowed)
}
