//! The bounded HTTP client that the worker, signer and keeper use to read the platform's job
//! feed and to download exact-commit archives.
//!
//! Every response is treated as hostile: only `https` (or plain `http` to a loopback host) is
//! contacted, redirects are refused rather than followed, each request has a total time
//! bound, bodies are counted while streaming and abandoned at their cap (never buffered past
//! it), and JSON nesting is checked with a byte scan before the parser sees it.
//!
//! It deliberately does not validate jobs (that is `verifier-sdk`'s job on the returned
//! values), does not retry, and never logs a URL's userinfo or query, or any header.

mod depth;
mod policy;

use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use verifier_sdk::{Address, Network};

pub use depth::exceeds_depth;
pub use policy::{check_url, is_loopback, redact};

/// Path of the verification-job feed under the API base (PROTOCOL §2).
pub const JOBS_PATH: &str = "/v1/base/autonomous-bounties/verification-jobs";

/// Most entries one feed answer may hold; a longer feed is refused whole. Far above any real
/// feed (one answer lists the open jobs of one verifier), and low enough that a 16 MiB body of
/// tiny entries cannot turn into millions of parsed values and report rows.
pub const MAX_FEED_JOBS: usize = 10_000;

/// Why a request failed. Messages never contain a URL's userinfo or query, or a header.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL does not parse or has no host.
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    /// The URL is neither `https` nor plain `http` to a loopback host.
    #[error("refusing {url}: only https, or http to a loopback host, is allowed")]
    NotHttps {
        /// The URL, redacted.
        url: String,
    },
    /// The server answered with a redirect, which is never followed.
    #[error("redirect refused: the server answered {status}")]
    RedirectRefused {
        /// The 3xx status.
        status: u16,
    },
    /// The body (or its announced length) is over the cap.
    #[error("response exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: u64,
    },
    /// The JSON nests deeper than the cap.
    #[error("json nesting exceeds the limit of {limit} levels")]
    TooDeep {
        /// The cap.
        limit: usize,
    },
    /// The request did not finish within its time bound.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// The server answered with a non-success, non-redirect status.
    #[error("server answered http status {status}")]
    HttpStatus {
        /// The status.
        status: u16,
    },
    /// The body is not valid JSON, or not the expected shape.
    #[error("invalid json response: {0}")]
    InvalidJson(String),
    /// The feed returned the same job id more than once for one query.
    #[error("the feed returned job {0} more than once")]
    DuplicateJob(String),
    /// The feed holds more entries than [`MAX_FEED_JOBS`]; none of them is used.
    #[error("the job feed has more than {limit} entries; refusing all of them")]
    TooManyJobs {
        /// The cap.
        limit: usize,
    },
    /// Connecting, TLS, or reading the body failed.
    #[error("transport error: {0}")]
    Transport(String),
    /// Writing the downloaded bytes failed.
    #[error("writing the download failed: {0}")]
    Write(#[source] std::io::Error),
}

impl ClientError {
    /// A stable snake_case name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidUrl(_) => "invalid_url",
            Self::NotHttps { .. } => "not_https",
            Self::RedirectRefused { .. } => "redirect_refused",
            Self::TooLarge { .. } => "too_large",
            Self::TooDeep { .. } => "too_deep",
            Self::Timeout(_) => "timeout",
            Self::HttpStatus { .. } => "http_status",
            Self::InvalidJson(_) => "invalid_json",
            Self::DuplicateJob(_) => "duplicate_job",
            Self::TooManyJobs { .. } => "too_many_jobs",
            Self::Transport(_) => "transport",
            Self::Write(_) => "write",
        }
    }

    /// Whether retrying the same request later may succeed (network trouble, server errors),
    /// as opposed to an answer that breaks a rule and will break it again.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout(_) | Self::Transport(_) | Self::Write(_) => true,
            Self::HttpStatus { status } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// The client's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// Connection establishment bound.
    pub connect_timeout: Duration,
    /// Total bound of a JSON request, body included.
    pub json_timeout: Duration,
    /// Total bound of a download, body included.
    pub download_timeout: Duration,
    /// Largest JSON body accepted.
    pub max_json_bytes: u64,
    /// Deepest JSON nesting accepted.
    pub max_json_depth: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            json_timeout: Duration::from_secs(60),
            download_timeout: Duration::from_secs(600),
            max_json_bytes: 16 << 20,
            max_json_depth: 64,
        }
    }
}

/// Download progress: bytes so far and the announced total, if any.
pub type Progress<'a> = &'a mut (dyn FnMut(u64, Option<u64>) + Send);

/// The bounded client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PlatformClient {
    http: reqwest::Client,
    limits: ClientLimits,
}

impl PlatformClient {
    /// Builds a client that never follows redirects.
    pub fn new(limits: ClientLimits) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits.connect_timeout)
            .user_agent(concat!(
                "agent-bounties-platform-client/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(transport)?;
        Ok(Self { http, limits })
    }

    /// The bounds in force.
    pub fn limits(&self) -> ClientLimits {
        self.limits
    }

    /// `GET {api_base}/v1/base/autonomous-bounties/verification-jobs?network=…&verifier=0x…`:
    /// the bare JSON array of jobs for `verifier`, each left unvalidated.
    pub async fn fetch_jobs(
        &self,
        api_base: &str,
        network: Network,
        verifier: Address,
    ) -> Result<Vec<Value>, ClientError> {
        let url = jobs_url(api_base, network, verifier)?;
        let body = self.get_json_body(url.as_str()).await?;
        parse_jobs(&body, MAX_FEED_JOBS)
    }

    /// The one job with `job_id` in `verifier`'s feed, or `None`. More than one job with that
    /// id is an error: the caller could not know which one it is meant to act on.
    pub async fn fetch_job(
        &self,
        api_base: &str,
        network: Network,
        verifier: Address,
        job_id: &str,
    ) -> Result<Option<Value>, ClientError> {
        let mut matching = self
            .fetch_jobs(api_base, network, verifier)
            .await?
            .into_iter()
            .filter(|job| job.get("job_id").and_then(Value::as_str) == Some(job_id));
        let first = matching.next();
        if first.is_some() && matching.next().is_some() {
            return Err(ClientError::DuplicateJob(
                job_id.chars().take(200).collect(),
            ));
        }
        Ok(first)
    }

    /// GETs `url` and parses the body as JSON within the size and depth caps.
    pub async fn get_json(&self, url: &str) -> Result<Value, ClientError> {
        let body = self.get_json_body(url).await?;
        serde_json::from_slice(&body)
            .map_err(|e| ClientError::InvalidJson(e.to_string().chars().take(256).collect()))
    }

    /// GETs `url` and returns the body once it is known to be within the size and depth caps.
    async fn get_json_body(&self, url: &str) -> Result<Vec<u8>, ClientError> {
        let url = check_url(url)?;
        let limit = self.limits.max_json_bytes;
        let timeout = self.limits.json_timeout;
        let body = bounded(timeout, async {
            let mut response = self.send(url, timeout).await?;
            let mut body = Vec::new();
            while let Some(chunk) = next_chunk(&mut response, timeout).await? {
                let chunk = chunk.as_ref();
                if body.len() as u64 + chunk.len() as u64 > limit {
                    return Err(ClientError::TooLarge { limit });
                }
                body.extend_from_slice(chunk);
            }
            Ok(body)
        })
        .await?;
        if exceeds_depth(&body, self.limits.max_json_depth).is_some() {
            return Err(ClientError::TooDeep {
                limit: self.limits.max_json_depth,
            });
        }
        Ok(body)
    }

    /// Streams `url` into `writer`, failing as soon as more than `max_bytes` arrive (or are
    /// announced). Returns the number of bytes written. `progress` is called after each chunk.
    pub async fn download_to<W: AsyncWrite + Unpin + Send>(
        &self,
        url: &str,
        writer: &mut W,
        max_bytes: u64,
        progress: Progress<'_>,
    ) -> Result<u64, ClientError> {
        let url = check_url(url)?;
        let timeout = self.limits.download_timeout;
        bounded(timeout, async {
            let mut response = self.send(url, timeout).await?;
            let announced = response.content_length();
            let mut written = 0u64;
            while let Some(chunk) = next_chunk(&mut response, timeout).await? {
                let chunk = chunk.as_ref();
                written = written.saturating_add(chunk.len() as u64);
                if written > max_bytes {
                    return Err(ClientError::TooLarge { limit: max_bytes });
                }
                writer.write_all(chunk).await.map_err(ClientError::Write)?;
                progress(written, announced);
            }
            writer.flush().await.map_err(ClientError::Write)?;
            Ok(written)
        })
        .await
    }

    async fn send(&self, url: Url, timeout: Duration) -> Result<reqwest::Response, ClientError> {
        let shown = redact(&url);
        tracing::debug!(url = %shown, "http get");
        let response = self
            .http
            .get(url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| request_error(e, timeout))?;
        check_status(response.status())?;
        Ok(response)
    }
}

/// Parses a feed body as a JSON array of at most `max` entries. The count is checked while
/// parsing, and entries past the cap are skipped without being built, so an over-long feed
/// costs no more memory than `max` entries.
fn parse_jobs(body: &[u8], max: usize) -> Result<Vec<Value>, ClientError> {
    use serde::de::{DeserializeSeed, Error as _, IgnoredAny, SeqAccess, Visitor};

    struct Jobs<'a> {
        max: usize,
        over: &'a std::cell::Cell<bool>,
    }
    impl<'de> DeserializeSeed<'de> for Jobs<'_> {
        type Value = Vec<Value>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Value>, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Jobs<'_> {
        type Value = Vec<Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a json array of jobs")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
            let mut jobs = Vec::new();
            loop {
                if jobs.len() == self.max {
                    if seq.next_element::<IgnoredAny>()?.is_some() {
                        self.over.set(true);
                        return Err(A::Error::custom("too many entries"));
                    }
                    return Ok(jobs);
                }
                match seq.next_element::<Value>()? {
                    Some(job) => jobs.push(job),
                    None => return Ok(jobs),
                }
            }
        }
    }

    let over = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = Jobs { max, over: &over }
        .deserialize(&mut de)
        .and_then(|jobs| de.end().map(|()| jobs));
    match parsed {
        Ok(jobs) => Ok(jobs),
        Err(_) if over.get() => Err(ClientError::TooManyJobs { limit: max }),
        Err(e) if e.is_data() => Err(ClientError::InvalidJson(
            "the job feed is not a json array".into(),
        )),
        Err(e) => Err(ClientError::InvalidJson(
            e.to_string().chars().take(256).collect(),
        )),
    }
}

/// The feed URL for one verifier.
pub fn jobs_url(api_base: &str, network: Network, verifier: Address) -> Result<Url, ClientError> {
    let base = api_base.trim_end_matches('/');
    check_url(&format!(
        "{base}{JOBS_PATH}?network={}&verifier={verifier}",
        network.name()
    ))
}

fn check_status(status: StatusCode) -> Result<(), ClientError> {
    if status.is_redirection() {
        return Err(ClientError::RedirectRefused {
            status: status.as_u16(),
        });
    }
    if !status.is_success() {
        return Err(ClientError::HttpStatus {
            status: status.as_u16(),
        });
    }
    Ok(())
}

/// The announced length is checked by the caller's running count, so a lying
/// `Content-Length` cannot make us buffer more than the cap.
async fn next_chunk(
    response: &mut reqwest::Response,
    timeout: Duration,
) -> Result<Option<impl AsRef<[u8]>>, ClientError> {
    response
        .chunk()
        .await
        .map_err(|e| request_error(e, timeout))
}

/// reqwest's own timeout covers the request; this outer bound also covers a writer that
/// stalls, so no call can outlive its budget.
async fn bounded<T>(
    timeout: Duration,
    fut: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| ClientError::Timeout(timeout))?
}

fn request_error(e: reqwest::Error, timeout: Duration) -> ClientError {
    if e.is_timeout() {
        return ClientError::Timeout(timeout);
    }
    transport(e)
}

/// The error chain without the URL reqwest attaches (it may hold userinfo or a query).
fn transport(e: reqwest::Error) -> ClientError {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    ClientError::Transport(text.chars().take(512).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_entry_cap_is_exact_and_refuses_the_whole_feed() {
        let feed = |n: usize| format!("[{}]", vec!["{}"; n].join(",")).into_bytes();
        assert_eq!(parse_jobs(&feed(3), 3).unwrap().len(), 3);
        assert_eq!(parse_jobs(b"[]", 3).unwrap().len(), 0);
        assert!(matches!(
            parse_jobs(&feed(4), 3),
            Err(ClientError::TooManyJobs { limit: 3 })
        ));
        // Refused at the first entry past the cap, before the rest is even parsed.
        assert!(matches!(
            parse_jobs(b"[0,0,0,0,", 3),
            Err(ClientError::TooManyJobs { limit: 3 })
        ));
        for bad in [&b"{\"jobs\":[]}"[..], b"[1,", b"[] []", b"7"] {
            assert!(
                matches!(parse_jobs(bad, 3), Err(ClientError::InvalidJson(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(!ClientError::TooManyJobs { limit: 1 }.is_transient());
    }

    #[test]
    fn jobs_url_has_the_protocol_shape() {
        let verifier: Address = "0xBE6292B9E465F549E2363B918D6DD9187038431E"
            .parse()
            .unwrap();
        let url = jobs_url("https://api.example.com/", Network::BaseMainnet, verifier).unwrap();
        assert_eq!(
            url.as_str(),
            "https://api.example.com/v1/base/autonomous-bounties/verification-jobs\
             ?network=base-mainnet&verifier=0xbe6292b9e465f549e2363b918d6dd9187038431e"
        );
        assert!(matches!(
            jobs_url("http://api.example.com", Network::BaseSepolia, verifier),
            Err(ClientError::NotHttps { .. })
        ));
    }

    #[test]
    fn transient_errors_are_the_retryable_ones() {
        assert!(ClientError::Timeout(Duration::from_secs(1)).is_transient());
        assert!(ClientError::HttpStatus { status: 503 }.is_transient());
        assert!(ClientError::HttpStatus { status: 429 }.is_transient());
        assert!(!ClientError::HttpStatus { status: 404 }.is_transient());
        assert!(!ClientError::RedirectRefused { status: 302 }.is_transient());
        assert!(!ClientError::TooLarge { limit: 1 }.is_transient());
        assert!(!ClientError::TooDeep { limit: 1 }.is_transient());
    }
}
