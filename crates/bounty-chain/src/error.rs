//! Why reading the chain failed, shared by the JSON-RPC connection ([`crate::rpc`]) and the
//! bounty reader ([`crate::reader`]), which both return it.

use verifier_sdk::Address;

/// Longest verifier list accepted from a contract. `threshold` is a `uint8` and must equal the
/// verifier count for this engine, so a longer list can never be served and only costs work.
pub const MAX_VERIFIERS: usize = 255;

/// Why reading a bounty failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainReadError {
    /// The RPC URL did not parse. The URL itself is withheld: it may carry an API key.
    #[error("rpc url is not a valid url")]
    InvalidUrl,
    /// The RPC URL is neither `https` nor plain `http` to a loopback host. Withheld too.
    #[error("rpc url must be https, or http to a loopback host (127.0.0.1, [::1], localhost)")]
    InsecureUrl,
    /// The HTTP client could not be built.
    #[error("could not build the http client: {0}")]
    Client(String),
    /// A JSON-RPC request or a contract view failed. `detail` has the RPC URL redacted.
    #[error("reading {what} failed: {detail}")]
    Rpc {
        /// Which request failed (`eth_chainId`, `status()`, ...).
        what: &'static str,
        /// The underlying error, with the RPC URL replaced by `<rpc-url>`.
        detail: String,
    },
    /// No contract code at the bounty address at the pinned block.
    #[error("no contract code at {bounty} at block {block_number}")]
    NoContract {
        /// The address that was read.
        bounty: Address,
        /// The pinned block.
        block_number: u64,
    },
    /// `status()` returned a value the protocol does not define.
    #[error("status() returned unknown value {0}")]
    UnknownStatus(u8),
    /// `verificationMode()` returned a value the protocol does not define.
    #[error("verificationMode() returned unknown value {0}")]
    UnknownMode(u8),
    /// `verifiers()` returned more than [`MAX_VERIFIERS`] addresses.
    #[error("verifiers() returned {count} addresses, more than the limit of {MAX_VERIFIERS}")]
    TooManyVerifiers {
        /// How many addresses the contract returned.
        count: usize,
    },
}

impl ChainReadError {
    /// Whether the node or the transport failed (a later retry may succeed), rather than the
    /// URL or what the contract answered.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Rpc { .. } | Self::Client(_))
    }
}
