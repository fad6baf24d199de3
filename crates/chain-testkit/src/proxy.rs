//! Misbehaving JSON-RPC endpoints in front of the real local node, for the failover tests
//! (#43): each is a loopback HTTP server that forwards what it does not break.
//!
//! The refusing and rate-limiting ones answer `eth_chainId` and `eth_blockNumber` like a
//! healthy endpoint and fail everything else, so they pass the start-up check and every real
//! request must move on from them (a provider whose plan covers only the cheap calls).
//!
//! A test whose lie is its own ([`intercept`]) writes only the lie: parsing the request,
//! forwarding it ([`Upstream`]) and writing the answer are here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use test_http::{Request, Response};

/// How a proxy misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Forwards everything (a healthy endpoint through a proxy, for request counts).
    None,
    /// HTTP 403 to everything but `eth_chainId` and `eth_blockNumber`.
    Forbidden,
    /// JSON-RPC `-32005` "rate limit exceeded" to everything but `eth_chainId` and
    /// `eth_blockNumber`.
    RateLimited,
    /// Its head (`eth_blockNumber`) is this many blocks behind the node's.
    Lagging(u64),
    /// Answers another chain id (1) to `eth_chainId`.
    OtherChain,
    /// Answers `eth_sendRawTransaction` with the transaction's hash and drops it.
    Swallowing,
}

/// A running proxy: its URL and what it saw.
#[derive(Debug, Clone)]
pub struct RpcProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    seen: Arc<Mutex<HashMap<String, u64>>>,
    how: Arc<Mutex<Misbehaviour>>,
}

impl RpcProxy {
    /// How many `eth_sendRawTransaction` requests reached this proxy.
    pub fn raw_transactions(&self) -> u64 {
        self.calls("eth_sendRawTransaction")
    }

    /// From the next request on, misbehaves as `how` (an endpoint that falls behind, or
    /// starts refusing, in the middle of a run).
    pub fn set(&self, how: Misbehaviour) {
        *self.how.lock().unwrap_or_else(PoisonError::into_inner) = how;
    }

    /// How many requests of `method` reached this proxy.
    pub fn calls(&self, method: &str) -> u64 {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(method)
            .copied()
            .unwrap_or(0)
    }
}

/// The node behind a proxy, for a proxy's handler to forward requests to.
#[derive(Debug, Clone)]
pub struct Upstream {
    http: reqwest::Client,
    url: String,
}

impl Upstream {
    /// The node's JSON-RPC answer to `request` (any request, not only the one being
    /// answered); `None` when the node did not answer with JSON.
    pub async fn call(&self, request: &Value) -> Option<Value> {
        self.http
            .post(&self.url)
            .json(request)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    }
}

/// Starts a JSON-RPC proxy to `upstream` that answers each request with what `answer` makes
/// of it; `answer` forwards through the [`Upstream`] what it does not forge. A request that is
/// not JSON, or an answer of `None`, gets no response (the connection closes).
pub async fn intercept<F, Fut>(upstream: &str, answer: F) -> std::io::Result<String>
where
    F: Fn(Value, Upstream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Value>> + Send + 'static,
{
    let node = Upstream {
        http: reqwest::Client::new(),
        url: upstream.to_owned(),
    };
    test_http::serve(move |req: Request| {
        let reply = serde_json::from_slice(&req.body)
            .ok()
            .map(|request| answer(request, node.clone()));
        async move { respond(&reply?.await?) }
    })
    .await
}

fn respond(value: &Value) -> Option<Response> {
    Some(Response::ok(serde_json::to_vec(value).unwrap_or_default()))
}

/// Starts a proxy to `upstream` that misbehaves as `how`.
pub async fn start(upstream: &str, how: Misbehaviour) -> std::io::Result<RpcProxy> {
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let counts = seen.clone();
    let how = Arc::new(Mutex::new(how));
    let current = how.clone();
    let node = Upstream {
        http: reqwest::Client::new(),
        url: upstream.to_owned(),
    };
    let url = test_http::serve(move |req: Request| {
        let (node, counts) = (node.clone(), counts.clone());
        let how = *current.lock().unwrap_or_else(PoisonError::into_inner);
        async move {
            let request: Value = serde_json::from_slice(&req.body).ok()?;
            let id = request.get("id").cloned().unwrap_or(Value::Null);
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let cheap = matches!(method.as_str(), "eth_chainId" | "eth_blockNumber");
            *counts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(method.clone())
                .or_default() += 1;
            let forward = || node.call(&request);
            match how {
                Misbehaviour::Forbidden if !cheap => Some(Response::status(403)),
                Misbehaviour::RateLimited if !cheap => respond(&json!({
                    "jsonrpc": "2.0", "id": id,
                    "error": {"code": -32005, "message": "rate limit exceeded"}
                })),
                Misbehaviour::OtherChain if method == "eth_chainId" => {
                    respond(&json!({"jsonrpc": "2.0", "id": id, "result": "0x1"}))
                }
                Misbehaviour::Lagging(blocks) if method == "eth_blockNumber" => {
                    let mut real = forward().await?;
                    let head = real
                        .get("result")
                        .and_then(Value::as_str)
                        .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())?;
                    real["result"] = json!(format!("{:#x}", head.saturating_sub(blocks)));
                    respond(&real)
                }
                Misbehaviour::Swallowing if method == "eth_sendRawTransaction" => {
                    let raw = request
                        .pointer("/params/0")
                        .and_then(Value::as_str)
                        .and_then(|h| alloy::hex::decode(h.trim_start_matches("0x")).ok())?;
                    let hash = alloy::primitives::keccak256(&raw);
                    respond(&json!({"jsonrpc": "2.0", "id": id, "result": format!("{hash}")}))
                }
                _ => respond(&forward().await?),
            }
        }
    })
    .await?;
    Ok(RpcProxy { url, seen, how })
}
