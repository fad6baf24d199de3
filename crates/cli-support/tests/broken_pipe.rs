//! A reader that goes away and a socket whose peer went away are two different things: the
//! first should end a command-line tool quietly, the second is an I/O error the code handles
//! (a Docker daemon or a Postgres server that restarted under a long-running `worker serve`).
//! Each case runs in a child process (this test binary again, picked by an environment
//! variable), since the signal disposition is process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};

const CHILD: &str = "CLI_SUPPORT_BROKEN_PIPE_CHILD";

/// Runs this test binary again as the child `case`.
fn child(case: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Not a test of its own: the body of the child processes above.
#[test]
fn child_entry() {
    let Ok(case) = std::env::var(CHILD) else {
        return;
    };
    cli_support::quiet_broken_stdout();
    match case.as_str() {
        "socket" => {
            // A peer gone before the write, deterministically: the write must come back as
            // EPIPE, which the caller turns into an error (here: exit 0 to say so).
            let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            drop(b);
            // Vectored, as hyper writes a request's head and body to Docker's socket: writev(2)
            // takes no MSG_NOSIGNAL, unlike the send(2) behind a plain write.
            let buf = [0u8; 64];
            let err = a
                .write_vectored(&[std::io::IoSlice::new(&buf), std::io::IoSlice::new(&buf)])
                .unwrap_err();
            eprintln!("write to a closed socket: {err}");
            std::process::exit(if err.kind() == std::io::ErrorKind::BrokenPipe {
                0
            } else {
                3
            });
        }
        "stdout" => {
            // The harness has written its own lines by now; from here stdout is a pipe whose
            // reader is gone, as under `| head -1` once head has its line.
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            rustix::stdio::dup2_stdout(&writer).unwrap();
            for _ in 0..1000 {
                println!("a line nobody reads");
            }
            std::process::exit(4);
        }
        other => panic!("unknown case {other}"),
    }
}

/// The fleet chaos lane lost a paused `worker serve` to a signal no fault sent: with SIGPIPE's
/// default action restored for `| head -1`, the first write to a Docker or Postgres socket
/// whose peer had gone killed the whole service instead of failing that one request.
#[test]
fn a_write_to_a_socket_whose_peer_went_away_is_an_error_not_a_kill() {
    let out = child("socket");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        None,
        "killed by a signal: {:?} {stderr}",
        out.status
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("write to a closed socket"), "{stderr}");
}

/// `tool | head -1` ends the tool quietly, as the default SIGPIPE action would: no panic
/// message, no exit 101.
#[test]
fn a_closed_stdout_still_ends_the_process_quietly() {
    let out = child("stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "panicked: {stderr}");
    assert_ne!(out.status.code(), Some(4), "the writes went on: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.signal(), Some(13), "{:?} {stderr}", out.status);
}
