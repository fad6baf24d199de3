//! The fault injectors: a feed/archive server that can be down, slow or answer 5xx; an RPC
//! proxy in front of the node that drops, delays, lags a block behind or reorders; small
//! tmpfs filesystems that can be filled; signals and `docker kill` from outside. Each is
//! switched per cycle by the driver; none knows about the schedule.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::rng::SplitMix64;
use super::schedule::{FeedMode, RpcMode};
use crate::E2eError;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another handler panicked mid-update of a fault switch; the
    // value is still a valid switch.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Feed query prefix (every verifier and network gets the same job list).
const FEED_PREFIX: &str = "/v1/base/autonomous-bounties/verification-jobs?";

struct FeedState {
    mode: Option<FeedMode>,
    rng: SplitMix64,
}

/// The platform feed and codeload stand-in, with a fault switch.
pub struct FaultyServer {
    url: String,
    routes: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    state: Arc<Mutex<FeedState>>,
    feed: Arc<Mutex<Vec<u8>>>,
}

fn serialize(jobs: &Value) -> Result<Vec<u8>, E2eError> {
    serde_json::to_vec(jobs).map_err(|e| E2eError::Setup {
        what: "serialize the feed",
        detail: e.to_string(),
    })
}

impl FaultyServer {
    /// Serves `jobs` as the feed on a fresh loopback port.
    pub async fn start(jobs: &Value, seed: u64) -> Result<Self, E2eError> {
        let feed = Arc::new(Mutex::new(serialize(jobs)?));
        let listed = feed.clone();
        let routes: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let state = Arc::new(Mutex::new(FeedState {
            mode: None,
            rng: SplitMix64::new(seed ^ 0xfeed),
        }));
        let (r, s) = (routes.clone(), state.clone());
        let url = test_http::serve(move |request| {
            let (mode, flaky_hit) = {
                let mut st = lock(&s);
                let mode = st.mode;
                let hit = match mode {
                    Some(FeedMode::FlakyPercent(p)) => st.rng.chance(p),
                    _ => false,
                };
                (mode, hit)
            };
            let target = request.target().to_owned();
            let found = if target.starts_with(FEED_PREFIX) {
                Some((lock(&listed).clone(), "application/json"))
            } else {
                lock(&r)
                    .get(&target)
                    .cloned()
                    .map(|b| (b, "application/x-gzip"))
            };
            async move {
                match mode {
                    Some(FeedMode::Down) => return None,
                    Some(FeedMode::SlowMs(ms)) => {
                        tokio::time::sleep(Duration::from_millis(ms)).await
                    }
                    Some(FeedMode::Status(code)) => return Some(test_http::Response::status(code)),
                    Some(FeedMode::FlakyPercent(_)) if flaky_hit => {
                        return Some(test_http::Response::status(503));
                    }
                    _ => {}
                }
                let Some((body, kind)) = found else {
                    return Some(test_http::Response::status(404));
                };
                let mut response = test_http::Response::status(200);
                response.headers.push(("Content-Type".into(), kind.into()));
                response.body = body;
                Some(response)
            }
        })
        .await
        .map_err(|e| E2eError::Setup {
            what: "start the feed server",
            detail: e.to_string(),
        })?;
        Ok(Self {
            url,
            routes,
            state,
            feed,
        })
    }

    /// Replaces the job list the feed serves.
    pub fn set_jobs(&self, jobs: &Value) -> Result<(), E2eError> {
        *lock(&self.feed) = serialize(jobs)?;
        Ok(())
    }

    /// Base URL (`--api` and `--archive-base`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves `archive` at `path`.
    pub fn add(&self, path: &str, archive: Vec<u8>) {
        lock(&self.routes).insert(path.to_owned(), archive);
    }

    /// Sets (or with `None` clears) the fault.
    pub fn set_mode(&self, mode: Option<FeedMode>) {
        lock(&self.state).mode = mode;
    }
}

struct RpcState {
    mode: Option<RpcMode>,
    rng: SplitMix64,
    /// Armed by a `Broadcast` kill: fired after a raw transaction reached the node; the proxy
    /// holds that answer until the driver says the process is gone.
    on_broadcast: Option<(Arc<Notify>, Arc<Notify>)>,
    calls: u64,
    faulted_calls: u64,
    /// The lagging node's head under [`RpcMode::SplitLag`], fixed at its first call.
    frozen_head: Option<u64>,
}

/// A JSON-RPC proxy in front of the node.
pub struct RpcProxy {
    url: String,
    state: Arc<Mutex<RpcState>>,
}

impl RpcProxy {
    /// Proxies to `upstream` (`http://host:port`) from a fresh loopback port.
    pub async fn start(upstream: &str, seed: u64) -> Result<Self, E2eError> {
        let addr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let state = Arc::new(Mutex::new(RpcState {
            mode: None,
            rng: SplitMix64::new(seed ^ 0x0052_5043),
            on_broadcast: None,
            calls: 0,
            faulted_calls: 0,
            frozen_head: None,
        }));
        let s = state.clone();
        let url = test_http::serve(move |request| {
            let s = s.clone();
            let addr = addr.clone();
            async move { proxy(&addr, &s, &request.body).await }
        })
        .await
        .map_err(|e| E2eError::Setup {
            what: "start the rpc proxy",
            detail: e.to_string(),
        })?;
        Ok(Self { url, state })
    }

    /// The URL given to signer and keeper.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sets (or clears) the fault.
    pub fn set_mode(&self, mode: Option<RpcMode>) {
        let mut st = lock(&self.state);
        st.mode = mode;
        st.frozen_head = None;
    }

    /// Arms the broadcast hook: `fired` is notified after the next raw transaction reached
    /// the node; its answer is held until `released` is notified (or 10 s pass).
    pub fn arm_broadcast(&self, fired: Arc<Notify>, released: Arc<Notify>) {
        lock(&self.state).on_broadcast = Some((fired, released));
    }

    /// Disarms the hook.
    pub fn disarm_broadcast(&self) {
        lock(&self.state).on_broadcast = None;
    }

    /// (calls proxied, calls a fault changed) so far.
    pub fn counts(&self) -> (u64, u64) {
        let st = lock(&self.state);
        (st.calls, st.faulted_calls)
    }
}

async fn proxy(addr: &str, state: &Mutex<RpcState>, body: &[u8]) -> Option<test_http::Response> {
    let parsed: Value = serde_json::from_slice(body).ok()?;
    let (batch, calls) = match parsed {
        Value::Array(items) => (true, items),
        one => (false, vec![one]),
    };
    let mode = lock(state).mode;
    let mut answers = Vec::with_capacity(calls.len());
    for call in calls {
        answers.push(one_call(addr, state, mode, call).await?);
    }
    let out = if batch {
        if mode == Some(RpcMode::Reorder) {
            answers.reverse();
        }
        Value::Array(answers)
    } else {
        answers.pop()?
    };
    if mode == Some(RpcMode::Reorder) {
        let ms = lock(state).rng.range(0, 400);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    Some(test_http::Response::ok(serde_json::to_vec(&out).ok()?))
}

/// One call through the fault; `None` drops the connection.
async fn one_call(
    addr: &str,
    state: &Mutex<RpcState>,
    mode: Option<RpcMode>,
    mut call: Value,
) -> Option<Value> {
    let method = call
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let (drop_before, drop_after, lag) = {
        let mut st = lock(state);
        st.calls += 1;
        let r = match mode {
            Some(RpcMode::DropPercent(p)) if st.rng.chance(p) => {
                let before = st.rng.chance(50);
                (before, !before, false)
            }
            Some(RpcMode::LagOneBlock) => (false, false, st.rng.chance(50)),
            Some(RpcMode::SplitLag) => (false, false, method != "eth_getTransactionCount"),
            _ => (false, false, false),
        };
        if r.0 || r.1 || r.2 {
            st.faulted_calls += 1;
        }
        r
    };
    if let Some(RpcMode::DelayMs(ms)) = mode {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if drop_before {
        return None;
    }
    // `stale`: the head of the lagging node, whose receipts and state are answered.
    let mut stale = None;
    if lag {
        let head = upstream(
            addr,
            &json!({"jsonrpc":"2.0","id":0,"method":"eth_blockNumber","params":[]}),
        )
        .await?;
        let n = head
            .get("result")
            .and_then(Value::as_str)
            .and_then(parse_hex)?;
        let h = if mode == Some(RpcMode::SplitLag) {
            // Frozen at the block before the first lagging call of the cycle: on a shared
            // node other tests mine blocks all the time, and a node exactly one block behind
            // would catch up before the keeper reads it again.
            *lock(state).frozen_head.get_or_insert(n.saturating_sub(1))
        } else {
            n.saturating_sub(1)
        };
        stale = Some(h);
        let behind = json!(format!("0x{h:x}"));
        let params = call.get_mut("params").and_then(Value::as_array_mut);
        match (method.as_str(), params) {
            // Nonce, state and "latest" block from the node that is one block behind.
            (
                "eth_getTransactionCount"
                | "eth_getBalance"
                | "eth_call"
                | "eth_getCode"
                | "eth_estimateGas",
                Some(p),
            ) => {
                // A call without a block tag means "latest" (estimateGas, and eth_call as
                // alloy sends it): pin it to the lagging head as well.
                if p.len() == 1 && matches!(method.as_str(), "eth_call" | "eth_estimateGas") {
                    p.push(json!("latest"));
                }
                if let Some(tag) = p.get_mut(1)
                    && matches!(tag.as_str(), Some("latest" | "pending"))
                {
                    *tag = behind;
                }
            }
            ("eth_getBlockByNumber", Some(p)) => {
                if let Some(tag) = p.get_mut(0)
                    && matches!(tag.as_str(), Some("latest" | "pending"))
                {
                    *tag = behind;
                }
            }
            _ => {}
        }
    }
    let mut answer = upstream(addr, &call).await?;
    if method == "eth_sendRawTransaction" {
        let hook = lock(state).on_broadcast.take();
        if let Some((fired, released)) = hook {
            fired.notify_one();
            let _ = tokio::time::timeout(Duration::from_secs(10), released.notified()).await;
        }
    }
    if drop_after {
        return None;
    }
    if let Some(h) = stale {
        match method.as_str() {
            "eth_blockNumber" => answer["result"] = json!(format!("0x{h:x}")),
            // A transaction mined after the lagging node's head is unknown to it, like its
            // receipt.
            "eth_getTransactionReceipt" | "eth_getTransactionByHash" => {
                let mined_in = answer
                    .pointer("/result/blockNumber")
                    .and_then(Value::as_str)
                    .and_then(parse_hex);
                if mined_in.is_some_and(|b| b > h) {
                    answer["result"] = Value::Null;
                }
            }
            _ => {}
        }
    }
    Some(answer)
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// One JSON-RPC call to the node over a fresh HTTP/1.1 connection.
async fn upstream(addr: &str, call: &Value) -> Option<Value> {
    let body = serde_json::to_vec(call).ok()?;
    let mut sock = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.ok()?;
    sock.write_all(&body).await.ok()?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), sock.read_to_end(&mut raw))
        .await
        .ok()?
        .ok()?;
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let rest = &raw[end + 4..];
    let content = if head.contains("transfer-encoding: chunked") {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    serde_json::from_slice(&content).ok()
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// A small tmpfs of the driver's own, under its work directory; unmounted on drop.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a `size_mib` tmpfs at `path` (created), owned by this process's user. Needs
    /// root or password-less sudo ([`test_root`]); fails loudly otherwise.
    pub fn mount(path: &Path, size_mib: u64) -> Result<Self, E2eError> {
        std::fs::create_dir_all(path).map_err(crate::io("create a mount point", path))?;
        // A mount left by an earlier run of ours that was killed: only our own path.
        test_root::umount(path, false);
        let out =
            test_root::mount_tmpfs(path, size_mib, 0o755).map_err(crate::io("run mount", path))?;
        if !out.status.success() {
            return Err(E2eError::Setup {
                what: "mount a tmpfs for the disk-full faults (run as root or with password-less sudo, or pass --no-disk)",
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fill_path(&self) -> PathBuf {
        self.path.join(".chaos-fill")
    }

    /// Writes a file until the filesystem is full.
    pub fn fill(&self) -> Result<(), E2eError> {
        use std::io::Write as _;
        let path = self.fill_path();
        let mut f =
            std::fs::File::create(&path).map_err(crate::io("create the fill file", &path))?;
        let chunk = vec![0u8; 1 << 20];
        loop {
            match f.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        // The last partial chunk: byte-sized writes until nothing fits.
        while f.write(&[0u8; 512]).is_ok_and(|n| n > 0) {}
        Ok(())
    }

    /// Frees the space again.
    pub fn release(&self) {
        let _ = std::fs::remove_file(self.fill_path());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        self.release();
        if !test_root::umount(&self.path, false) {
            // Busy (a process still holds a file): detach it now, freed when released.
            test_root::umount(&self.path, true);
        }
    }
}

/// Sends SIGTERM (`kill -s TERM`; this crate forbids `unsafe`, so no libc call).
pub fn sigterm(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-s", "TERM", &pid.to_string()])
        .output();
}

/// The worker sandbox containers whose owner label names one of `pids` (id, state), all
/// states. The owner label is `<boot id>/<pid ns>/<pid>/<start time>`.
pub async fn containers_of(pids: &HashSet<u32>) -> Vec<(String, String)> {
    let out = tokio::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=dev.agent-bounties.owner",
            "--format",
            "{{.ID}} {{.State}} {{.Label \"dev.agent-bounties.owner\"}}",
        ])
        .output()
        .await;
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let id = parts.next()?;
            let st = parts.next()?;
            let owner = parts.next()?;
            let pid: u32 = owner.split('/').nth(2)?.parse().ok()?;
            pids.contains(&pid).then(|| (id.to_owned(), st.to_owned()))
        })
        .collect()
}

/// Waits until a container of `pid` is running; returns its id.
pub async fn running_container_of(pid: u32) -> String {
    let pids = HashSet::from([pid]);
    loop {
        if let Some((id, _)) = containers_of(&pids)
            .await
            .into_iter()
            .find(|(_, s)| s == "running")
        {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Whether systemd runs this host and knows `docker.service` (a GitHub runner); a host
/// without systemd as init (this machine, the project's CI VM) runs dockerd by hand.
async fn systemd_manages_docker() -> bool {
    let state = tokio::process::Command::new("systemctl")
        .arg("is-system-running")
        .output()
        .await;
    let Ok(state) = state else { return false };
    let state = String::from_utf8_lossy(&state.stdout);
    if !matches!(
        state.trim(),
        "running" | "degraded" | "starting" | "initializing" | "maintenance"
    ) {
        return false;
    }
    tokio::process::Command::new("systemctl")
        .args(["cat", "docker.service"])
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

async fn docker_answers() -> bool {
    tokio::process::Command::new("docker")
        .arg("version")
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command name, which may hold spaces.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X")
    })
}

/// Waits up to `limit` for the Docker daemon to answer; whether it did.
pub async fn wait_for_docker(limit: Duration) -> bool {
    wait_for(limit, docker_answers).await
}

/// Restarts the Docker daemon and waits (up to 90 s) until it answers again: `systemctl
/// restart docker` where systemd manages it, else as `scripts/services.sh` runs it: SIGTERM
/// to the pid in `/var/run/docker.pid`, wait for it to exit (up to 60 s), then `setsid
/// dockerd` with its output appended to `log`. True when the daemon answered after the
/// restart. Every container on the daemon stops: never on a machine others are testing on.
pub async fn restart_docker(log: &Path) -> bool {
    if systemd_manages_docker().await {
        let ok = tokio::process::Command::new("systemctl")
            .args(["restart", "docker"])
            .status()
            .await
            .is_ok_and(|s| s.success());
        return ok && wait_for(Duration::from_secs(90), docker_answers).await;
    }
    let Some(pid) = std::fs::read_to_string("/var/run/docker.pid")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return false;
    };
    sigterm(pid);
    if !wait_for(Duration::from_secs(60), || async move { !alive(pid) }).await {
        return false;
    }
    let Ok(out) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    else {
        return false;
    };
    let Ok(err) = out.try_clone() else {
        return false;
    };
    // std's Child, dropped without a wait: the daemon outlives this process (its own
    // session, so a test runner's process-group kill does not reach it either).
    let started = std::process::Command::new("setsid")
        .arg("dockerd")
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .is_ok();
    started && wait_for(Duration::from_secs(90), docker_answers).await
}

/// Polls `cond` every 250 ms until it holds or `limit` passes.
async fn wait_for<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `docker kill` from outside, as an operator or the OOM killer of another cgroup would.
pub async fn docker_kill(id: &str) -> bool {
    tokio::process::Command::new("docker")
        .args(["kill", id])
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_decoded() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(),
            Some(&b"abcde"[..])
        );
        assert_eq!(dechunk(b"5\r\nab"), None);
    }
}
