//! Incremental capture of one output stream: SHA-256 and byte count over everything received,
//! plus a bounded tail for humans.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};
use verifier_sdk::Sha256Digest;

/// Most bytes of each stream kept verbatim in the evidence record (DESIGN §5).
pub const TAIL_LIMIT: usize = 32 * 1024;

/// Hashes and counts a stream as chunks arrive and keeps its last [`TAIL_LIMIT`] bytes, and
/// every byte it was fed (the reader stops feeding it at the manifest's output cap, so this is
/// bounded by the cap plus one chunk) for `--log-dir`.
#[derive(Clone, Debug, Default)]
pub struct OutputCapture {
    hasher: Sha256,
    bytes: u64,
    tail: VecDeque<u8>,
    full: Vec<u8>,
}

/// Everything a run wrote, within the output cap; kept beside the evidence (which holds only
/// the tails), never part of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FullOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

impl OutputCapture {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        self.full.extend_from_slice(chunk);
        self.bytes = self
            .bytes
            .saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        // Only the last TAIL_LIMIT bytes of a big chunk can survive, so skip the rest up front.
        let keep_from = chunk.len().saturating_sub(TAIL_LIMIT);
        self.tail.extend(chunk.iter().skip(keep_from));
        let excess = self.tail.len().saturating_sub(TAIL_LIMIT);
        self.tail.drain(..excess);
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Final digest, count and tail.
    pub fn finish(self) -> StreamEvidence {
        self.finish_keeping().0
    }

    /// Final digest, count and tail, and every byte fed.
    pub fn finish_keeping(self) -> (StreamEvidence, Vec<u8>) {
        let tail_bytes: Vec<u8> = self.tail.into_iter().collect();
        let evidence = StreamEvidence {
            sha256: Sha256Digest::from_bytes(self.hasher.finalize().into()),
            bytes: self.bytes,
            tail_truncated: u64::try_from(tail_bytes.len()).unwrap_or(u64::MAX) < self.bytes,
            tail: String::from_utf8_lossy(&tail_bytes).into_owned(),
        };
        (evidence, self.full)
    }
}

pub use verifier_sdk::evidence::StreamEvidence;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_count_cover_all_bytes_across_chunks() {
        let mut capture = OutputCapture::new();
        capture.push(b"hello ");
        capture.push(b"");
        capture.push(b"world\n");
        let evidence = capture.finish();
        let expected = hex::encode(Sha256::digest(b"hello world\n"));
        assert_eq!(evidence.sha256.to_string(), format!("sha256:{expected}"));
        assert_eq!(evidence.bytes, 12);
        assert_eq!(evidence.tail, "hello world\n");
        assert!(!evidence.tail_truncated);
    }

    #[test]
    fn empty_stream_has_the_empty_digest() {
        let evidence = OutputCapture::new().finish();
        assert_eq!(
            evidence.sha256.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(evidence.bytes, 0);
    }

    #[test]
    fn tail_is_bounded_and_keeps_the_end() {
        let mut capture = OutputCapture::new();
        let big = vec![b'a'; TAIL_LIMIT * 3];
        capture.push(&big);
        for _ in 0..100 {
            capture.push(&[b'b'; 1000]);
        }
        capture.push(b"END");
        let evidence = capture.finish();
        assert_eq!(evidence.tail.len(), TAIL_LIMIT);
        assert!(evidence.tail.ends_with("bbbEND"));
        assert!(evidence.tail_truncated);
        assert_eq!(evidence.bytes, (TAIL_LIMIT * 3 + 100_000 + 3) as u64);
    }

    #[test]
    fn invalid_utf8_tail_is_lossy_but_hash_is_exact() {
        let mut capture = OutputCapture::new();
        capture.push(&[0xff, b'o', b'k']);
        let evidence = capture.finish();
        assert_eq!(evidence.tail, "\u{fffd}ok");
        let expected = hex::encode(Sha256::digest([0xff, b'o', b'k']));
        assert_eq!(evidence.sha256.to_string(), format!("sha256:{expected}"));
    }
}
