//! Scrubbing an RPC URL out of error text, since it may embed an API key: one type the
//! connection (`rpc`) makes and the failover transport (`failover`) uses, below both.

/// Replaces the RPC URL in error text with `<rpc-url>`.
#[derive(Clone)]
pub struct Redactor {
    // The URL as given and as the parser normalised it.
    spellings: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The spellings are the secret.
        f.debug_struct("Redactor").finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor of every one of `spellings` (the URL as given and as parsed).
    pub(crate) fn new(spellings: Vec<String>) -> Self {
        Self { spellings }
    }

    /// `text` with every spelling of the URL replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.spellings {
            if !secret.is_empty() {
                text = text.replace(secret.as_str(), "<rpc-url>");
            }
        }
        text
    }
}
