//! RPC failover: several JSON-RPC endpoints (`--rpc` given more than once, in order) behind
//! one alloy transport, so the signer's reads and the keeper's reads and writes go on when one
//! provider refuses (HTTP 403), rate-limits (HTTP 429, JSON-RPC -32005), fails (5xx, a dropped
//! connection) or falls behind.
//!
//! What moves a request to the next endpoint is decided by [`classify`], a pure function:
//! transport errors, HTTP error statuses, unreadable answers and JSON-RPC rate-limit or
//! unknown-block errors. Any other JSON-RPC error — an execution error above all (a revert) —
//! is the chain's answer: it is returned as it is and never retried elsewhere as if it were
//! transient. After every usable endpoint failed a request, the pass is repeated after a
//! back-off, a bounded number of times.
//!
//! Before use, [`Failover::check`] asks every endpoint its `eth_chainId` and head: endpoints
//! that disagree on the chain id are refused as a whole, with each endpoint's answer (one of
//! them is on another chain, and which one cannot be told from here); an endpoint that does not
//! answer, or whose head lags the best by more than the configured number of blocks, is not
//! used. Reads of one decision are pinned to one block number by their callers
//! ([`crate::reader`]); an endpoint that does not know that block answers "unknown block",
//! which moves the read to the next endpoint.
//!
//! `eth_sendRawTransaction` is sent to every usable endpoint: the same signed bytes, so the
//! same hash (the idempotency key), and an endpoint that accepts a transaction and drops it
//! cannot hold it back. Payment is still read only from a confirmed `BountySettled`.
//!
//! An endpoint is named by its position (`rpc 2`), never by its URL (it may carry an API key).

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use alloy::providers::{Provider, RootProvider};
use alloy::rpc::client::RpcClient;
use alloy::transports::http::Http;
use alloy::transports::{RpcError, TransportError, TransportErrorKind, TransportFut};
use alloy_json_rpc::{RequestPacket, ResponsePacket};

use crate::redact::Redactor;

/// Default: an endpoint whose head is more than this many blocks behind the best is skipped.
pub const DEFAULT_MAX_LAG_BLOCKS: u64 = 5;

/// How requests fail over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// An endpoint whose head lags the best by more than this is skipped.
    pub max_lag_blocks: u64,
    /// The pause before the second pass over the endpoints (doubled for each further one).
    pub backoff: Duration,
    /// How many passes over the usable endpoints one request may take.
    pub passes: u32,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        Self {
            max_lag_blocks: DEFAULT_MAX_LAG_BLOCKS,
            backoff: Duration::from_millis(500),
            passes: 3,
        }
    }
}

/// What one endpoint's answer to a request means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The chain's answer (a result, or a JSON-RPC error such as a revert): returned as is.
    Answer,
    /// The endpoint failed the request, not the chain: the next endpoint is asked.
    NextEndpoint,
}

/// JSON-RPC error codes providers use for "over your rate limit".
const RATE_LIMIT_CODES: [i64; 2] = [-32005, 429];

/// Whether `result`, one endpoint's answer, is the chain's or the endpoint's failure.
pub fn classify(result: &Result<ResponsePacket, TransportError>) -> Attempt {
    match result {
        Ok(packet) => {
            let errors: Vec<_> = match packet {
                ResponsePacket::Single(r) => r.payload.as_error().into_iter().collect(),
                ResponsePacket::Batch(rs) => {
                    rs.iter().filter_map(|r| r.payload.as_error()).collect()
                }
            };
            if errors.iter().any(|e| endpoint_error(e.code, &e.message)) {
                Attempt::NextEndpoint
            } else {
                Attempt::Answer
            }
        }
        // Refused, rate-limited, failed or unreachable: the endpoint's trouble, not the chain's.
        Err(RpcError::Transport(_) | RpcError::DeserError { .. } | RpcError::NullResp) => {
            Attempt::NextEndpoint
        }
        Err(_) => Attempt::Answer,
    }
}

/// Whether a JSON-RPC error is the endpoint's (rate limit, a block it does not have yet).
fn endpoint_error(code: i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    RATE_LIMIT_CODES.contains(&code)
        || message.contains("rate limit")
        || message.contains("too many requests")
        || message.contains("header not found")
        || message.contains("unknown block")
}

/// Why the endpoints cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FailoverError {
    /// The endpoints answered different chain ids (a configuration error).
    #[error("the --rpc endpoints disagree on the chain id: {answers}")]
    ChainIdsDisagree {
        /// Each endpoint's answer, by position.
        answers: String,
    },
    /// No endpoint answered its chain id and head.
    #[error("no --rpc endpoint answered: {answers}")]
    NoneAnswered {
        /// Each endpoint's failure, by position, URLs redacted.
        answers: String,
    },
}

impl FailoverError {
    /// Whether a later attempt may succeed (no endpoint answered), rather than a
    /// configuration to fix (chain ids that disagree).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::NoneAnswered { .. })
    }
}

/// One endpoint's answer to [`Failover::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointAnswer {
    /// `eth_chainId` and `eth_blockNumber`, or why not (URL redacted).
    pub answer: Result<(u64, u64), String>,
}

/// Which endpoints to use after their answers: the chain id they agree on and, per endpoint,
/// whether it is used. Pure: the answers come in from [`Failover::check`].
pub fn choose(
    answers: &[EndpointAnswer],
    max_lag_blocks: u64,
) -> Result<(u64, Vec<bool>), FailoverError> {
    let described = || {
        answers
            .iter()
            .enumerate()
            .map(|(i, a)| match &a.answer {
                Ok((chain, head)) => format!("rpc {}: chain id {chain} at block {head}", i + 1),
                Err(e) => format!("rpc {}: no answer ({e})", i + 1),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let answered: Vec<(u64, u64)> = answers
        .iter()
        .filter_map(|a| a.answer.clone().ok())
        .collect();
    let Some(&(chain_id, _)) = answered.first() else {
        return Err(FailoverError::NoneAnswered {
            answers: described(),
        });
    };
    if answered.iter().any(|(c, _)| *c != chain_id) {
        return Err(FailoverError::ChainIdsDisagree {
            answers: described(),
        });
    }
    let best = answered.iter().map(|(_, h)| *h).max().unwrap_or(0);
    let usable = answers
        .iter()
        .map(|a| {
            a.answer
                .as_ref()
                .is_ok_and(|(_, head)| best.saturating_sub(*head) <= max_lag_blocks)
        })
        .collect();
    Ok((chain_id, usable))
}

/// Several endpoints behind one transport (see the module's docs). Cheap to clone.
#[derive(Clone)]
pub struct Failover {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<Http<reqwest::Client>>,
    /// Endpoints the start-up check kept on the chain (a lagging one included): the head
    /// re-check ([`Failover::head`]) chooses among these.
    on_chain: Mutex<Vec<bool>>,
    usable: Mutex<Vec<bool>>,
    policy: FailoverPolicy,
    redactor: Redactor,
}

impl std::fmt::Debug for Failover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URLs are secrets.
        f.debug_struct("Failover")
            .field("endpoints", &self.inner.endpoints.len())
            .finish_non_exhaustive()
    }
}

impl Failover {
    /// A transport over `endpoints` (in order), all usable until [`Self::check`] says
    /// otherwise.
    pub(crate) fn new(
        endpoints: Vec<Http<reqwest::Client>>,
        policy: FailoverPolicy,
        redactor: Redactor,
    ) -> Self {
        let usable = Mutex::new(vec![true; endpoints.len()]);
        let on_chain = Mutex::new(vec![true; endpoints.len()]);
        Self {
            inner: Arc::new(Inner {
                endpoints,
                on_chain,
                usable,
                policy,
                redactor,
            }),
        }
    }

    /// Asks every endpoint its chain id and head; keeps those that answer and are not behind
    /// (see [`choose`]); returns the chain id they agree on.
    pub async fn check(&self) -> Result<u64, FailoverError> {
        let mut answers = Vec::with_capacity(self.inner.endpoints.len());
        for http in &self.inner.endpoints {
            let provider =
                RootProvider::<alloy::network::Ethereum>::new(RpcClient::new(http.clone(), false));
            let scrub = |e: &dyn std::fmt::Display| self.inner.redactor.scrub(&e.to_string());
            let answer = match provider.get_chain_id().await {
                Err(e) => Err(scrub(&e)),
                Ok(chain) => match provider.get_block_number().await {
                    Err(e) => Err(scrub(&e)),
                    Ok(head) => Ok((chain, head)),
                },
            };
            answers.push(EndpointAnswer { answer });
        }
        let (chain_id, usable) = choose(&answers, self.inner.policy.max_lag_blocks)?;
        for (i, (a, used)) in answers.iter().zip(&usable).enumerate() {
            if !used {
                tracing::warn!(
                    endpoint = i + 1,
                    "rpc {} is not used: {}",
                    i + 1,
                    match &a.answer {
                        Ok((_, head)) => format!(
                            "its head {head} lags the best by more than {} blocks",
                            self.inner.policy.max_lag_blocks
                        ),
                        Err(e) => format!("no answer ({e})"),
                    }
                );
            }
        }
        *self
            .inner
            .on_chain
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = answers
            .iter()
            .map(|a| a.answer.as_ref().is_ok_and(|(c, _)| *c == chain_id))
            .collect();
        *self
            .inner
            .usable
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = usable;
        Ok(chain_id)
    }

    /// The head read (`eth_blockNumber`), with the lag re-checked: every endpoint on the chain
    /// is asked, those more than `max_lag_blocks` behind the best answer are skipped from now on
    /// (and those that caught up are used again), and the first endpoint in order that is not
    /// behind answers. So an endpoint that falls behind in the middle of a run stops serving
    /// the reads that need the head, not only one found behind at start. `None` when no
    /// endpoint gave a head (the caller then fails over as for any request).
    async fn head(
        &self,
        request: &RequestPacket,
    ) -> Option<Result<ResponsePacket, TransportError>> {
        let on_chain: Vec<usize> = {
            let on = self
                .inner
                .on_chain
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (0..self.inner.endpoints.len())
                .filter(|i| on.get(*i).copied().unwrap_or(false))
                .collect()
        };
        let asks = on_chain.into_iter().filter_map(|i| {
            let mut http = self.endpoint(i)?;
            let request = request.clone();
            Some(async move { (i, tower::Service::call(&mut http, request).await) })
        });
        let answers: Vec<(usize, Option<u64>, Result<ResponsePacket, TransportError>)> =
            futures_util::future::join_all(asks)
                .await
                .into_iter()
                .map(|(i, r)| (i, head_of(&r), r))
                .collect();
        let best = answers.iter().filter_map(|(_, h, _)| *h).max()?;
        let max_lag = self.inner.policy.max_lag_blocks;
        let mut usable = self
            .inner
            .usable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut chosen = None;
        for (i, head, result) in answers {
            let fresh = head.is_some_and(|h| best.saturating_sub(h) <= max_lag);
            let was = usable.get(i).copied().unwrap_or(false);
            if was && !fresh {
                tracing::warn!(
                    endpoint = i + 1,
                    "rpc {} is skipped from now on: {}",
                    i + 1,
                    head.map_or_else(
                        || format!("no head ({})", self.describe(&result)),
                        |h| format!(
                            "its head {h} lags the best {best} by more than {max_lag} blocks"
                        )
                    )
                );
            } else if !was && fresh {
                tracing::info!(
                    endpoint = i + 1,
                    "rpc {} caught up and is used again",
                    i + 1
                );
            }
            if let Some(u) = usable.get_mut(i) {
                *u = fresh;
            }
            if fresh && chosen.is_none() {
                chosen = Some(result);
            }
        }
        chosen
    }

    fn usable(&self) -> Vec<usize> {
        let usable = self
            .inner
            .usable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (0..self.inner.endpoints.len())
            .filter(|i| usable.get(*i).copied().unwrap_or(false))
            .collect()
    }

    fn endpoint(&self, i: usize) -> Option<Http<reqwest::Client>> {
        self.inner.endpoints.get(i).cloned()
    }

    async fn send(self, request: RequestPacket) -> Result<ResponsePacket, TransportError> {
        let broadcast = request
            .method_names()
            .any(|m| m == "eth_sendRawTransaction");
        if broadcast {
            return self.broadcast(request).await;
        }
        let head = matches!(&request, RequestPacket::Single(r) if r.method() == "eth_blockNumber");
        if head
            && self.inner.endpoints.len() > 1
            && let Some(answer) = self.head(&request).await
        {
            return answer;
        }
        let mut last = None;
        let mut pause = self.inner.policy.backoff;
        for pass in 0..self.inner.policy.passes.max(1) {
            if pass > 0 {
                tokio::time::sleep(pause).await;
                pause = pause.saturating_mul(2);
            }
            for i in self.usable() {
                let Some(mut http) = self.endpoint(i) else {
                    continue;
                };
                let result = tower::Service::call(&mut http, request.clone()).await;
                match classify(&result) {
                    Attempt::Answer => return result,
                    Attempt::NextEndpoint => {
                        tracing::warn!(
                            endpoint = i + 1,
                            "rpc {} failed a request, asking the next endpoint: {}",
                            i + 1,
                            self.describe(&result)
                        );
                        last = Some(result);
                    }
                }
            }
        }
        last.unwrap_or_else(|| Err(TransportErrorKind::custom_str("no usable --rpc endpoint")))
    }

    /// The same signed transaction to every usable endpoint; the first endpoint's acceptance
    /// in order is the answer, else the first chain answer (e.g. a nonce error), else the last
    /// failure.
    async fn broadcast(self, request: RequestPacket) -> Result<ResponsePacket, TransportError> {
        let sends = self.usable().into_iter().filter_map(|i| {
            let mut http = self.endpoint(i)?;
            let request = request.clone();
            Some(async move { (i, tower::Service::call(&mut http, request).await) })
        });
        let results = futures_util::future::join_all(sends).await;
        let accepted =
            |r: &Result<ResponsePacket, TransportError>| matches!(r, Ok(p) if !p.is_error());
        let mut chosen: Option<Result<ResponsePacket, TransportError>> = None;
        let mut answer: Option<Result<ResponsePacket, TransportError>> = None;
        let mut last = None;
        for (i, result) in results {
            if accepted(&result) {
                if chosen.is_none() {
                    chosen = Some(result);
                }
            } else if classify(&result) == Attempt::Answer {
                tracing::info!(
                    endpoint = i + 1,
                    "rpc {} refused the transaction: {}",
                    i + 1,
                    self.describe(&result)
                );
                if answer.is_none() {
                    answer = Some(result);
                }
            } else {
                tracing::warn!(
                    endpoint = i + 1,
                    "rpc {} failed the broadcast: {}",
                    i + 1,
                    self.describe(&result)
                );
                last = Some(result);
            }
        }
        chosen
            .or(answer)
            .or(last)
            .unwrap_or_else(|| Err(TransportErrorKind::custom_str("no usable --rpc endpoint")))
    }

    fn describe(&self, result: &Result<ResponsePacket, TransportError>) -> String {
        let text = match result {
            Ok(packet) => match packet {
                ResponsePacket::Single(r) => r
                    .payload
                    .as_error()
                    .map_or_else(|| "an answer".to_owned(), ToString::to_string),
                ResponsePacket::Batch(_) => "a batch answer".to_owned(),
            },
            Err(e) => e.to_string(),
        };
        self.inner.redactor.scrub(&text)
    }
}

/// The block number an `eth_blockNumber` answer carries (`None`: a failure or an error).
fn head_of(result: &Result<ResponsePacket, TransportError>) -> Option<u64> {
    let Ok(ResponsePacket::Single(r)) = result else {
        return None;
    };
    let raw = r.payload.as_success()?;
    let hex: String = serde_json::from_str(raw.get()).ok()?;
    u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok()
}

impl tower::Service<RequestPacket> for Failover {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RequestPacket) -> Self::Future {
        Box::pin(self.clone().send(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_json_rpc::{ErrorPayload, Id, Response, ResponsePayload};

    fn error(code: i64, message: &str) -> Result<ResponsePacket, TransportError> {
        Ok(ResponsePacket::Single(Response {
            id: Id::Number(1),
            payload: ResponsePayload::Failure(ErrorPayload {
                code,
                message: message.to_owned().into(),
                data: None,
            }),
        }))
    }

    #[test]
    fn a_revert_is_the_chains_answer_and_never_retried_elsewhere() {
        assert_eq!(
            classify(&error(3, "execution reverted: not submitted")),
            Attempt::Answer
        );
        assert_eq!(
            classify(&error(-32000, "execution reverted")),
            Attempt::Answer
        );
        assert_eq!(classify(&error(-32000, "nonce too low")), Attempt::Answer);
    }

    #[test]
    fn rate_limits_refusals_and_failures_move_to_the_next_endpoint() {
        assert_eq!(
            classify(&error(-32005, "limit exceeded")),
            Attempt::NextEndpoint
        );
        assert_eq!(
            classify(&error(-32000, "Rate limit reached")),
            Attempt::NextEndpoint
        );
        assert_eq!(
            classify(&error(-32000, "header not found")),
            Attempt::NextEndpoint
        );
        for status in [403, 429, 500, 502, 503] {
            let e = TransportErrorKind::http_error(status, String::new());
            assert_eq!(classify(&Err(e)), Attempt::NextEndpoint, "{status}");
        }
        let dropped = TransportErrorKind::custom_str("connection reset");
        assert_eq!(classify(&Err(dropped)), Attempt::NextEndpoint);
    }

    fn answers(list: &[Result<(u64, u64), &str>]) -> Vec<EndpointAnswer> {
        list.iter()
            .map(|a| EndpointAnswer {
                answer: a.map_err(str::to_owned),
            })
            .collect()
    }

    #[test]
    fn endpoints_on_two_chains_are_refused_with_each_answer() {
        let err = choose(
            &answers(&[Ok((8453, 10)), Err("HTTP error 403"), Ok((1, 10))]),
            5,
        )
        .unwrap_err();
        assert!(!err.is_transient());
        assert_eq!(
            err.to_string(),
            "the --rpc endpoints disagree on the chain id: rpc 1: chain id 8453 at block 10; rpc 2: no answer (HTTP error 403); rpc 3: chain id 1 at block 10"
        );
    }

    #[test]
    fn a_lagging_or_silent_endpoint_is_skipped_and_none_answering_is_transient() {
        let (chain, usable) = choose(
            &answers(&[
                Ok((8453, 97)),
                Ok((8453, 100)),
                Err("timeout"),
                Ok((8453, 98)),
            ]),
            2,
        )
        .unwrap();
        assert_eq!((chain, usable), (8453, vec![false, true, false, true]));
        let err = choose(&answers(&[Err("timeout")]), 2).unwrap_err();
        assert!(err.is_transient(), "{err}");
    }
}
