//! Test-only: one loopback HTTP/1.1 server for the test suites (a stand-in platform API, a
//! lying RPC proxy). Each connection carries one request (`Connection: close`); the handler
//! sees the request line, the head and the `Content-Length` body, and answers with a status
//! and a JSON body. Ships in no binary.

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
    pub status: &'static str,
    /// The JSON body.
    pub body: Vec<u8>,
}

impl Response {
    /// `200 OK` with `body`.
    pub fn ok(body: Vec<u8>) -> Self {
        Self {
            status: "200 OK",
            body,
        }
    }
    /// `404 Not Found` with `body`.
    pub fn not_found(body: Vec<u8>) -> Self {
        Self {
            status: "404 Not Found",
            body,
        }
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
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(&response.body).await;
    let _ = sock.shutdown().await;
}
