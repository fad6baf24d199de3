//! SIGINT and SIGTERM for the modes that run containers (`--run-regression`, `feed`,
//! `rehearse`).
//!
//! Without this, the default action ended the process at once and left its container running
//! until some later worker's stale sweep. Here the handlers are installed before any work
//! starts; the first signal drops the work future (so no further step runs: no next job, no
//! candidate, no cache entry, no evidence — each of those writes is synchronous, so it has
//! either completed before the signal was seen or never starts), then every container this
//! process created is killed and removed and the removal confirmed, and the command exits
//! 128 + the signal number: 130 for SIGINT, 143 for SIGTERM. A second signal during that
//! cleanup is ignored, so an impatient Ctrl-C cannot leave the container behind after all.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};

/// The signal that ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupted {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, a service manager stopping the worker).
    Terminate,
}

impl Interrupted {
    /// Its name, as people know it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }

    /// The exit code a shell reports for a process ended by it: 128 + the signal number.
    pub const fn exit_code(self) -> crate::exit::ExitCode {
        match self {
            Self::Interrupt => crate::exit::ExitCode::Interrupted,
            Self::Terminate => crate::exit::ExitCode::Terminated,
        }
    }
}

/// Runs `work` until it finishes or SIGINT/SIGTERM arrives, whichever is first. The handlers
/// stay installed afterwards (tokio does not restore the default action), which is what keeps a
/// second signal from killing the process during the cleanup that follows.
pub async fn until_interrupted<F: Future>(
    work: F,
) -> std::io::Result<Result<F::Output, Interrupted>> {
    // A SIGINT this process was started with ignored (`worker … &` from a script, `nohup`)
    // stays ignored, as shells do: a Ctrl-C meant for the foreground must not stop it.
    let mut interrupt = if worker_serve::shutdown::inherited_ignored(libc::SIGINT) {
        None
    } else {
        Some(signal(SignalKind::interrupt())?)
    };
    let mut terminate = signal(SignalKind::terminate())?;
    let interrupted = async {
        match interrupt.as_mut() {
            Some(interrupt) => interrupt.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        // Biased toward the work: when it finished at the same moment, its result stands.
        biased;
        output = work => Ok(Ok(output)),
        _ = interrupted => Ok(Err(Interrupted::Interrupt)),
        _ = terminate.recv() => Ok(Err(Interrupted::Terminate)),
    }
}

/// A run ended by a signal, after its containers were dealt with.
#[derive(Debug)]
pub struct Stopped {
    /// The signal.
    pub signal: Interrupted,
    /// The containers removed (confirmed), or why removal could not be confirmed.
    pub removed: Result<Vec<String>, worker_sandbox::SandboxError>,
}

impl Stopped {
    /// The line printed on stderr: what was interrupted, what was removed, what was not written.
    pub fn message(&self, what: &str) -> String {
        let containers = match &self.removed {
            Ok(ids) if ids.is_empty() => "no container was running".to_owned(),
            Ok(ids) => format!(
                "removed container{} {} (confirmed)",
                if ids.len() == 1 { "" } else { "s" },
                ids.iter()
                    .map(|id| id.chars().take(12).collect::<String>())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => format!("container removal could not be confirmed: {e}"),
        };
        format!(
            "interrupted by {}: stopped {what}; {containers}; no verdict, candidate or cache \
             entry was written for it",
            self.signal.name()
        )
    }
}

/// [`until_interrupted`], then on a signal every container of this process removed.
pub async fn run_interruptible<F: Future>(work: F) -> std::io::Result<Result<F::Output, Stopped>> {
    let signal = match until_interrupted(work).await? {
        Ok(output) => return Ok(Ok(output)),
        Err(signal) => signal,
    };
    let removed = match crate::engine::connect().await {
        Ok(executor) => executor.remove_own_containers().await,
        Err(e) => Err(e),
    };
    Ok(Err(Stopped { signal, removed }))
}
