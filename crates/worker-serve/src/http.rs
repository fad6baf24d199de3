//! The `--metrics-listen` endpoint: `GET /healthz` and `GET /metrics`, nothing else, on a
//! loopback address, or on any other only when asked for explicitly (`--metrics-allow-remote`,
//! for a central Prometheus: the endpoints are unauthenticated, so the host's firewall must
//! let only that Prometheus in). A dozen lines of HTTP/1.1 on a Tokio listener rather than a framework:
//! one request per connection, answered and closed.
//!
//! Bounded against a hostile local client: a request head larger than [`MAX_HEAD`] is
//! refused (431) without reading the rest, a head not complete within [`HEAD_DEADLINE`] is
//! dropped (slowloris), an answer that cannot be written within [`WRITE_DEADLINE`] is
//! dropped, and at most [`MAX_CONNECTIONS`] are served at once, so sockets and file
//! descriptors stay available to the runs. When all are taken, a new connection takes the
//! place of the oldest one still waiting for its request head (which is closed): idle
//! connections, however many a local user opens, can never shut out a health check, which
//! sends its head at once; a connection whose head has arrived is answered, never cut. Each
//! connection has its own task, so one slow client never delays another, nor the service
//! loop.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};

use super::telemetry::Telemetry;

/// Largest request head read.
pub const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Time a client has to take the answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Where `/healthz` and `/metrics` are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The address.
    pub addr: SocketAddr,
    /// Whether an address other than loopback may be used (`--metrics-allow-remote`).
    pub allow_remote: bool,
}

impl Listen {
    /// Loopback only.
    pub fn loopback(addr: SocketAddr) -> Self {
        Self {
            addr,
            allow_remote: false,
        }
    }

    /// Whether others than this host's own users can reach it.
    pub fn is_remote(&self) -> bool {
        !self.addr.ip().is_loopback()
    }
}

/// Why `--metrics-listen` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Not a loopback address, and no `--metrics-allow-remote`: a configuration a restart
    /// cannot fix.
    #[error(
        "--metrics-listen {0}: not a loopback address; the endpoints are unauthenticated, so another address needs --metrics-allow-remote and a firewall rule that lets only your Prometheus in (docs/operators.md, Monitoring); or use 127.0.0.1:PORT or [::1]:PORT"
    )]
    NotLoopback(SocketAddr),
    /// The bind failed.
    #[error("--metrics-listen {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// Refuses anything but a loopback address unless another was asked for explicitly: the
/// endpoints are unauthenticated.
pub fn check_listen(listen: Listen) -> Result<(), ListenError> {
    if listen.is_remote() && !listen.allow_remote {
        Err(ListenError::NotLoopback(listen.addr))
    } else {
        Ok(())
    }
}

/// Binds the listener (a loopback address unless [`Listen::allow_remote`]).
pub fn bind(listen: Listen) -> Result<StdListener, ListenError> {
    check_listen(listen)?;
    let addr = listen.addr;
    let listener = StdListener::bind(addr).map_err(|source| ListenError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ListenError::Bind { addr, source })?;
    Ok(listener)
}

/// Serves the listener until the task is dropped.
pub async fn run(listener: StdListener, telemetry: Arc<Telemetry>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "metrics listener");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // The connections still waiting for their request head, oldest first: dropping the
    // sender closes that connection.
    let waiting: Arc<Mutex<BTreeMap<u64, oneshot::Sender<()>>>> = Arc::default();
    let mut next = 0u64;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "metrics listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let oldest = waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop_first();
                // Every slot answering (each bounded by WRITE_DEADLINE): this one is closed.
                if oldest.is_none() {
                    drop(stream);
                    continue;
                }
                drop(oldest);
                match tokio::time::timeout(EVICT_WAIT, slots.clone().acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => {
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let seq = next;
        next += 1;
        let (evict, evicted) = oneshot::channel();
        waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(seq, evict);
        let telemetry = telemetry.clone();
        let waiting = waiting.clone();
        tokio::spawn(async move {
            serve_one(stream, &telemetry, evicted, || {
                waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&seq);
            })
            .await;
            drop(slot);
        });
    }
}

/// How long a new connection waits for the slot of the connection it evicted to be freed.
const EVICT_WAIT: Duration = Duration::from_secs(1);

/// Reads the head (unless `evicted` fires first), then answers; `head_read` is called once
/// the head is in, when the connection stops being evictable.
async fn serve_one(
    mut stream: TcpStream,
    telemetry: &Telemetry,
    evicted: oneshot::Receiver<()>,
    head_read: impl FnOnce(),
) {
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_DEADLINE, read_head(&mut stream)) => head,
        _ = evicted => return,
    };
    head_read();
    let answer = match head {
        Ok(Ok(head)) => respond(&head, telemetry),
        Ok(Err(HeadError::TooLarge)) => plain(431, "request head too large\n"),
        Ok(Err(HeadError::Closed)) | Err(_) => return,
    };
    let _ = tokio::time::timeout(WRITE_DEADLINE, async {
        stream.write_all(&answer).await?;
        stream.shutdown().await
    })
    .await;
}

enum HeadError {
    TooLarge,
    Closed,
}

/// Reads up to the blank line ending the head; the body (if any) is never read.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        let scan_from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head[scan_from..].windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(scan_from + end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

fn respond(head: &[u8], telemetry: &Telemetry) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return plain(400, "bad request\n");
    };
    if !version.starts_with("HTTP/1.") {
        return plain(400, "bad request\n");
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    if !matches!(path, "/healthz" | "/metrics") {
        return plain(404, "not found\n");
    }
    if method != "GET" {
        return response(
            405,
            "text/plain; charset=utf-8",
            &[("Allow", "GET")],
            b"only GET\n",
        );
    }
    if path == "/metrics" {
        return response(
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            &[],
            telemetry.render().as_bytes(),
        );
    }
    let (status, body) = match telemetry.health() {
        Ok(detail) => (200, detail),
        Err(bad) => (
            503,
            serde_json::json!({"status": bad.status, "reason": bad.reason}),
        ),
    };
    let mut body = serde_json::to_vec(&body).unwrap_or_default();
    body.push(b'\n');
    response(status, "application/json", &[], &body)
}

fn plain(status: u16, body: &str) -> Vec<u8> {
    response(status, "text/plain; charset=utf-8", &[], body.as_bytes())
}

fn response(status: u16, content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn serve_metrics_listen_refuses_every_non_loopback_address() {
        for ok in ["127.0.0.1:9464", "127.8.9.10:1", "[::1]:9464"] {
            assert!(
                check_listen(Listen::loopback(ok.parse().unwrap())).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "0.0.0.0:9464",
            "[::]:9464",
            "10.0.0.1:9464",
            "[::ffff:127.0.0.1]:9464",
        ] {
            assert!(
                matches!(
                    check_listen(Listen::loopback(bad.parse().unwrap())),
                    Err(ListenError::NotLoopback(_))
                ),
                "{bad}"
            );
        }
    }

    /// Issue 46.6: a central Prometheus must be able to scrape the worker: with
    /// `--metrics-allow-remote`, a non-loopback address is bound (before, every one was
    /// refused, exit 78, and the endpoint stayed reachable from the host only).
    #[test]
    fn serve_metrics_listen_on_a_non_loopback_address_when_allowed_explicitly() {
        let remote = Listen {
            addr: "0.0.0.0:0".parse().unwrap(),
            allow_remote: true,
        };
        assert!(remote.is_remote());
        let listener = bind(remote).unwrap();
        assert!(listener.local_addr().unwrap().ip().is_unspecified());
        let error = bind(Listen::loopback("0.0.0.0:0".parse().unwrap())).unwrap_err();
        assert!(
            error.to_string().contains("--metrics-allow-remote"),
            "{error}"
        );
    }

    #[test]
    fn serve_metrics_requests_other_than_get_of_the_two_paths_are_refused() {
        let t = Telemetry::new(
            Duration::from_secs(1),
            Arc::new(crate::clock::SystemClock::new()),
        );
        let status = |head: &str| {
            let out = respond(head.as_bytes(), &t);
            String::from_utf8_lossy(&out[9..12]).into_owned()
        };
        assert_eq!(status("GET /metrics HTTP/1.1"), "200");
        assert_eq!(status("GET /metrics?x=1 HTTP/1.0"), "200");
        assert_eq!(status("GET /healthz HTTP/1.1"), "503");
        assert_eq!(status("POST /healthz HTTP/1.1"), "405");
        assert_eq!(status("GET / HTTP/1.1"), "404");
        assert_eq!(status("GET /metrics/ HTTP/1.1"), "404");
        assert_eq!(status("GET /metrics HTTP/2"), "400");
        assert_eq!(status("GET  /metrics HTTP/1.1"), "400");
        assert_eq!(status("\u{0}\u{1}"), "400");
    }
}
