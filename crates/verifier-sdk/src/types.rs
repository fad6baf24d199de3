//! Domain newtypes with validating constructors and lowercase-hex display.
//!
//! Every value that crosses a trust boundary as text (digests, hashes, addresses) is parsed
//! into one of these before anything else looks at it, so a response hash can never be passed
//! where a transaction hash or a staged digest is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a textual value could not become a domain type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseValueError {
    /// A staged digest was not `sha256:` followed by 64 lowercase hex digits.
    #[error("expected sha256:<64 lowercase hex>, got {0:?}")]
    Sha256Digest(String),
    /// A bytes32 value was not `0x` followed by 64 hex digits.
    #[error("expected 0x-prefixed bytes32 (64 hex digits), got {0:?}")]
    Bytes32(String),
    /// An address was not `0x` followed by 40 hex digits.
    #[error("expected 0x-prefixed address (40 hex digits), got {0:?}")]
    Address(String),
}

fn truncate_for_error(s: &str) -> String {
    // Errors echo the offending value; cap it so a hostile multi-megabyte string cannot
    // flood logs.
    s.chars().take(96).collect()
}

fn decode_hex_fixed<const N: usize>(hex_digits: &str, lowercase_only: bool) -> Option<[u8; N]> {
    if hex_digits.len() != N * 2 {
        return None;
    }
    if lowercase_only && hex_digits.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(hex_digits, &mut out).ok()?;
    Some(out)
}

/// A SHA-256 digest written `sha256:<64 lowercase hex>` (staged trees, manifests, streams).
///
/// Uppercase is rejected on input: staged digests are compared as exact strings by every
/// implementation of the protocol, so accepting two spellings would let them disagree.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
    /// The raw digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
    /// The 64 lowercase hex digits without the `sha256:` prefix (used in store paths).
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl FromStr for Sha256Digest {
    type Err = ParseValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("sha256:")
            .and_then(|h| decode_hex_fixed::<32>(h, true))
            .map(Self)
            .ok_or_else(|| ParseValueError::Sha256Digest(truncate_for_error(s)))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A 32-byte value written `0x<64 hex>`; input case-insensitive, output lowercase.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes32([u8; 32]);

impl Bytes32 {
    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for Bytes32 {
    type Err = ParseValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .and_then(|h| decode_hex_fixed::<32>(h, false))
            .map(Self)
            .ok_or_else(|| ParseValueError::Bytes32(truncate_for_error(s)))
    }
}

impl fmt::Display for Bytes32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Bytes32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A 20-byte Ethereum address written `0x<40 hex>`; input case-insensitive, output lowercase.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address([u8; 20]);

impl Address {
    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }
    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }
}

impl FromStr for Address {
    type Err = ParseValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .and_then(|h| decode_hex_fixed::<20>(h, false))
            .map(Self)
            .ok_or_else(|| ParseValueError::Address(truncate_for_error(s)))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

// Conversions to alloy's types, for ABI encoding and signature recovery.
impl From<Bytes32> for alloy_primitives::B256 {
    fn from(v: Bytes32) -> Self {
        alloy_primitives::B256::from(v.0)
    }
}

impl From<alloy_primitives::B256> for Bytes32 {
    fn from(v: alloy_primitives::B256) -> Self {
        Self(v.0)
    }
}

impl From<Address> for alloy_primitives::Address {
    fn from(v: Address) -> Self {
        alloy_primitives::Address::from(v.0)
    }
}

impl From<alloy_primitives::Address> for Address {
    fn from(v: alloy_primitives::Address) -> Self {
        Self(v.0.0)
    }
}

macro_rules! serde_via_str {
    ($($ty:ty),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
serde_via_str!(Sha256Digest, Bytes32, Address);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_digest_requires_lowercase() {
        let lower = format!("sha256:{}", "ab".repeat(32));
        assert!(lower.parse::<Sha256Digest>().is_ok());
        let upper = format!("sha256:{}", "AB".repeat(32));
        assert!(upper.parse::<Sha256Digest>().is_err());
        assert!("sha256:".parse::<Sha256Digest>().is_err());
        assert!(
            format!("sha256:{}", "a".repeat(63))
                .parse::<Sha256Digest>()
                .is_err()
        );
    }

    #[test]
    fn bytes32_and_address_accept_either_case_and_print_lowercase() {
        let b: Bytes32 = format!("0x{}", "AB".repeat(32)).parse().unwrap();
        assert_eq!(b.to_string(), format!("0x{}", "ab".repeat(32)));
        let a: Address = format!("0x{}", "Cd".repeat(20)).parse().unwrap();
        assert_eq!(a.to_string(), format!("0x{}", "cd".repeat(20)));
        assert!("0x1234".parse::<Address>().is_err());
        assert!("ab".repeat(20).parse::<Address>().is_err());
    }
}
