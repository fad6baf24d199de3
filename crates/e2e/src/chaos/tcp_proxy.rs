//! A TCP proxy between one fleet host and Postgres that the fleet lane cuts and restores
//! ([`super::fleet`]): a real process-level partition of that host from the database, with
//! the server and the other hosts untouched. Cutting drops every connection through it at
//! once (both sides see the socket close) and closes each new one as soon as it is accepted,
//! until [`TcpProxy::restore`]; the host's client sees its database go away and come back,
//! as behind a firewall that resets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::E2eError;

/// The proxy; it stops with the runtime that started it, or when dropped.
#[derive(Debug)]
pub struct TcpProxy {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    // Bumped on each cut: every relay watching it ends, closing both of its sockets.
    cuts: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on an ephemeral loopback port and relays each connection to `target`.
    pub async fn start(target: SocketAddr) -> Result<Self, E2eError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| E2eError::Setup {
                what: "start the fleet lane's TCP proxy",
                detail: e.to_string(),
            })?;
        let addr = listener.local_addr().map_err(|e| E2eError::Setup {
            what: "read the TCP proxy's address",
            detail: e.to_string(),
        })?;
        let open = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0u64);
        let accept = tokio::spawn(accept_loop(listener, target, open.clone(), cuts.clone()));
        Ok(Self {
            addr,
            open,
            cuts,
            accept,
        })
    }

    /// Drops every connection and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Relays new connections again.
    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cuts.send_modify(|n| *n += 1);
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    open: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if !open.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let mut cut = cuts.subscribe();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo server behind the proxy: bytes pass, a cut closes the open connection and
    /// refuses the next, a restore lets the one after through.
    #[tokio::test]
    async fn a_cut_closes_open_connections_and_refuses_new_ones_until_restored() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = echo.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxy = TcpProxy::start(target).await.unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        proxy.cut();
        let mut rest = Vec::new();
        // The open connection ends: EOF or a reset, never an echo.
        let n = c.read_to_end(&mut rest).await.unwrap_or(0);
        assert_eq!(n, 0);
        let mut refused = TcpStream::connect(proxy.addr).await.unwrap();
        let _ = refused.write_all(b"ping").await;
        let n = refused.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0, "a connection made during the cut was relayed");

        proxy.restore();
        let mut again = TcpStream::connect(proxy.addr).await.unwrap();
        again.write_all(b"pong").await.unwrap();
        again.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
