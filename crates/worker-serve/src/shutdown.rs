//! SIGTERM/SIGINT for `worker serve`: the first signal asks the service to stop (no new
//! poll, no new job; the running one is cut short and recorded as interrupted).

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// A stop request, shared by the service's loops.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// Installs the SIGTERM and SIGINT handlers (within a Tokio runtime).
    pub fn install() -> std::io::Result<Self> {
        // As in the run modes: a SIGINT the service was started with ignored stays ignored.
        let mut int = if inherited_ignored(libc::SIGINT) {
            None
        } else {
            Some(signal(SignalKind::interrupt())?)
        };
        let mut term = signal(SignalKind::terminate())?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let mut int_recv = async || match int.as_mut() {
                Some(int) => int.recv().await,
                None => std::future::pending().await,
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int_recv() => tracing::info!("SIGINT: stopping"),
            }
            let _ = tx.send(true);
            // Later signals are absorbed: the bounded shutdown is already under way.
            loop {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int_recv() => {}
                }
            }
        });
        Ok(Self { rx })
    }

    /// A request that never fires (tests, one-shot callers).
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Self { rx }
    }

    /// A request fired by hand ([`StopRequest::fire`]) instead of by a signal: a test, or a
    /// caller that stops the service itself.
    pub fn by_hand() -> (StopRequest, Self) {
        let (tx, rx) = watch::channel(false);
        (StopRequest(tx), Self { rx })
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once a stop is asked for.
    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// The sending side of [`Shutdown::by_hand`].
#[derive(Debug)]
pub struct StopRequest(watch::Sender<bool>);

impl StopRequest {
    /// Asks the service to stop, as SIGTERM does.
    pub fn fire(&self) {
        self.0.send_replace(true);
    }
}

/// Whether `signo` was ignored when this process started, from `SigIgn` in /proc/self/status
/// (read before any handler of ours is installed; unreadable counts as not ignored).
pub fn inherited_ignored(signo: i32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| signo >= 1 && mask & (1 << (signo - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_signal_is_not_reported_as_inherited_ignored() {
        // The test harness starts with SIGTERM at its default action.
        assert!(!inherited_ignored(libc::SIGTERM));
        assert!(!inherited_ignored(0));
    }
}
