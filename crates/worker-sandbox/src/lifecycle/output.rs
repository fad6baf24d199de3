//! The container's attached output, read to its end on its own task: bytes are hashed and
//! captured until the combined count passes the cap, then discarded.

use futures_util::StreamExt;
use test_outcomes::{OutcomeParser, Stream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::engine::{Answers, Output};
use crate::streams::OutputCapture;

/// The attached stream, as the engine hands it over.
pub(super) type OutputStream = Answers<Output>;

/// Everything read from the container's output.
pub(super) struct Drained {
    pub stdout: OutputCapture,
    pub stderr: OutputCapture,
    /// Per-test outcomes read from every captured byte (not only the tails), under its caps.
    pub tests: OutcomeParser,
    /// Whether the combined output passed the cap.
    pub over_cap: bool,
    /// Why reading ended early, if it did.
    pub error: Option<String>,
}

impl Drained {
    fn failed(error: String) -> Self {
        Self {
            stdout: OutputCapture::new(),
            stderr: OutputCapture::new(),
            tests: OutcomeParser::new(),
            over_cap: false,
            error: Some(error),
        }
    }
}

/// Reads the attached output to its end. Bytes are captured until the combined count passes
/// `cap` (the crossing chunk included), then discarded; passing the cap is signalled once.
pub(super) async fn read_output(
    mut output: OutputStream,
    cap: u64,
    over_cap: tokio::sync::oneshot::Sender<()>,
) -> Drained {
    let mut stdout = OutputCapture::new();
    let mut stderr = OutputCapture::new();
    let mut tests = OutcomeParser::new();
    let mut over_cap = Some(over_cap);
    let mut error = None;
    while let Some(item) = output.next().await {
        let (capture, stream, message) = match item {
            Ok(Output::Stdout(message)) => (&mut stdout, Stream::Stdout, message),
            Ok(Output::Stderr(message)) => (&mut stderr, Stream::Stderr, message),
            Ok(Output::Other) => continue,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        if over_cap.is_some() {
            capture.push(&message);
            tests.push(stream, &message);
            if stdout.bytes().saturating_add(stderr.bytes()) > cap
                && let Some(sender) = over_cap.take()
            {
                // The receiver is gone only when the run already ended; nothing to tell.
                let _ = sender.send(());
            }
        }
    }
    Drained {
        stdout,
        stderr,
        tests,
        over_cap: over_cap.is_none(),
        error,
    }
}

/// Waits for the reader until `until`; a reader that fails or does not finish leaves empty
/// captures and the reason.
pub(super) async fn collect(reader: JoinHandle<Drained>, until: Instant) -> Drained {
    match tokio::time::timeout_at(until, reader).await {
        Ok(Ok(drained)) => drained,
        Ok(Err(join_error)) => Drained::failed(format!("output reader failed: {join_error}")),
        Err(_) => Drained::failed("output did not end after the container stopped".to_string()),
    }
}
