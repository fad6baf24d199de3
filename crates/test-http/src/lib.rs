//! Test-only: one loopback HTTP/1.1 server for the test suites (a stand-in platform API, a
//! lying RPC proxy). Each connection carries one request (`Connection: close`); the handler
//! sees the request line, the head and the `Content-Length` body, and answers with a status,
//! headers and a body, or not at all (a handler may also stall). Ships in no binary.

use std::future::Future;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head accepted; a test request is far smaller.
const MAX_HEAD: usize = 1 << 20;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, as text (without the blank line).
    pub head: String,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The method, e.g. `GET`.
    pub fn method(&self) -> &str {
        self.head.split(' ').next().unwrap_or("")
    }
    /// The request target, e.g. `/v1/jobs?x=1`.
    pub fn target(&self) -> &str {
        self.head.split(' ').nth(1).unwrap_or("")
    }
}

/// What the handler answers.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status line after `HTTP/1.1 `, e.g. `200 OK`.
    pub status: String,
    /// Headers sent before the body (`Connection: close` and, with `content_length`, the
    /// length are added).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Send `Content-Length`; without it the body is delimited by closing the connection.
    pub content_length: bool,
}

impl Response {
    /// `200 OK` with a JSON `body`.
    pub fn ok(body: Vec<u8>) -> Self {
        Self::status(200).json_body(body)
    }
    /// `404 Not Found` with a JSON `body`.
    pub fn not_found(body: Vec<u8>) -> Self {
        Self::status(404).json_body(body)
    }
    /// `code` with an empty body and no content type.
    pub fn status(code: u16) -> Self {
        let reason = match code {
            200 => "OK",
            302 => "Found",
            404 => "Not Found",
            500 => "Internal Server Error",
            _ => "Status",
        };
        Self {
            status: format!("{code} {reason}"),
            headers: Vec::new(),
            body: Vec::new(),
            content_length: true,
        }
    }
    /// The same status with `body` as JSON.
    #[must_use]
    pub fn json_body(mut self, body: Vec<u8>) -> Self {
        self.headers
            .push(("Content-Type".into(), "application/json".into()));
        self.body = body;
        self
    }
}

/// Serves `handler` on a fresh loopback port until the runtime ends; returns `http://<addr>`.
/// A handler answering `None` closes the connection without a response.
pub async fn serve<H, F>(handler: H) -> std::io::Result<String>
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Option<Response>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let handler = handler.clone();
            tokio::spawn(async move {
                let Some(request) = read_request(&mut sock).await else {
                    return;
                };
                if let Some(response) = handler(request).await {
                    respond(&mut sock, &response).await;
                }
            });
        }
    });
    Ok(url)
}

/// Reads one request: the head up to the blank line, then `Content-Length` body bytes.
async fn read_request(sock: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some(Request { head, body })
}

async fn respond(sock: &mut TcpStream, response: &Response) {
    let mut head = format!("HTTP/1.1 {}\r\n", response.status);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if response.content_length {
        head.push_str(&format!("Content-Length: {}\r\n", response.body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    if sock.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    // In chunks, so a client that stops reading at its size cap sees the connection end.
    for chunk in response.body.chunks(64 * 1024) {
        if sock.write_all(chunk).await.is_err() {
            return;
        }
    }
    let _ = sock.shutdown().await;
}
