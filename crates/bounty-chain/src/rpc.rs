//! One way to reach a JSON-RPC node, shared by the signer's reads and the keeper's writes: the
//! URL checked by [`check_rpc_url`], a client bounded by a per-request timeout, and every
//! spelling of the URL scrubbed from error text, since it may embed an API key.

use std::time::Duration;

use alloy::providers::RootProvider;
use alloy::rpc::client::RpcClient;
use alloy::transports::http::Http;

use crate::error::ChainReadError;
use crate::failover::{Failover, FailoverPolicy};
pub use crate::redact::Redactor;

/// Parses an RPC URL and applies the platform client's transport policy: `https` anywhere,
/// plain `http` only to a loopback host. Everything signer and keeper decide rests on what the
/// RPC answers (the bounty's state, the contract's digest, receipts), so an unauthenticated
/// remote endpoint is refused before any request. The URL never appears in the error.
pub fn check_rpc_url(rpc_url: &str) -> Result<reqwest::Url, ChainReadError> {
    platform_client::check_url(rpc_url).map_err(|e| match e {
        platform_client::ClientError::NotHttps { .. } => ChainReadError::InsecureUrl,
        _ => ChainReadError::InvalidUrl,
    })
}

/// A provider for `rpc_url` (see [`check_rpc_url`]) whose every request is bounded by
/// `timeout`, and the [`Redactor`] for its errors. Connects lazily.
pub fn connect_rpc(
    rpc_url: &str,
    timeout: Duration,
) -> Result<(RootProvider, Redactor), ChainReadError> {
    let url = check_rpc_url(rpc_url)?;
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| ChainReadError::Client(e.without_url().to_string()))?;
    let redactor = Redactor::new(vec![url.as_str().to_owned(), rpc_url.to_owned()]);
    let provider = RootProvider::new(RpcClient::new_http_with_client(client, url));
    Ok((provider, redactor))
}

/// The `--rpc` endpoints in order of preference and how they fail over. The URLs may embed
/// API keys: never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct RpcEndpoints {
    /// The URLs, in order.
    pub urls: Vec<String>,
    /// How requests move between them (unused with one).
    pub policy: FailoverPolicy,
}

impl std::fmt::Debug for RpcEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcEndpoints")
            .field("urls", &self.urls.len())
            .field("policy", &self.policy)
            .finish()
    }
}

impl From<String> for RpcEndpoints {
    /// One endpoint: exactly the behaviour of a single `--rpc`.
    fn from(url: String) -> Self {
        Self {
            urls: vec![url],
            policy: FailoverPolicy::default(),
        }
    }
}

/// Providers for `rpc_urls` in order (each checked by [`check_rpc_url`]): one URL is exactly
/// [`connect_rpc`]; several go through one [`Failover`] transport, returned too so the caller
/// can [`Failover::check`] the endpoints before use. The [`Redactor`] knows every URL.
pub fn connect_rpcs(
    rpc_urls: &[String],
    timeout: Duration,
    policy: FailoverPolicy,
) -> Result<(RootProvider, Redactor, Option<Failover>), ChainReadError> {
    match rpc_urls {
        [] => Err(ChainReadError::InvalidUrl),
        [one] => connect_rpc(one, timeout).map(|(p, r)| (p, r, None)),
        many => {
            let client = reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .map_err(|e| ChainReadError::Client(e.without_url().to_string()))?;
            let mut spellings = Vec::new();
            let mut endpoints = Vec::new();
            let mut local = true;
            for rpc_url in many {
                let url = check_rpc_url(rpc_url)?;
                local &= alloy::transports::utils::guess_local_url(url.as_str());
                spellings.extend([url.as_str().to_owned(), rpc_url.clone()]);
                endpoints.push(Http::with_client(client.clone(), url));
            }
            let redactor = Redactor::new(spellings);
            let failover = Failover::new(endpoints, policy, redactor.clone());
            let provider = RootProvider::new(RpcClient::new(failover.clone(), local));
            Ok((provider, redactor, Some(failover)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_the_url_are_scrubbed() {
        let (_, redactor) =
            connect_rpc("HTTPS://rpc.example/key123", Duration::from_secs(1)).unwrap();
        let text = "error sending request for url (https://rpc.example/key123): HTTPS://rpc.example/key123 refused";
        let scrubbed = redactor.scrub(text);
        assert!(!scrubbed.contains("key123"), "{scrubbed}");
        assert_eq!(
            scrubbed,
            "error sending request for url (<rpc-url>): <rpc-url> refused"
        );
        assert!(!format!("{redactor:?}").contains("key123"));
    }

    #[test]
    fn refused_urls_never_build_a_client() {
        assert_eq!(
            connect_rpc("http://rpc.example/key", Duration::from_secs(1)).unwrap_err(),
            ChainReadError::InsecureUrl
        );
        assert_eq!(
            connect_rpc("not a url", Duration::from_secs(1)).unwrap_err(),
            ChainReadError::InvalidUrl
        );
    }
}
