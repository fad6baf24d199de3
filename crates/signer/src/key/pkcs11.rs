//! The PKCS#11 key backend of the signer (issue #44 item 3), over the `pkcs11-key` crate the
//! keeper's gas key uses too: the token signs the EIP-712 digest, and the attestation gets
//! the contract's `v` ∈ {27, 28} from the recovery id computed there.

pub use pkcs11_key::{Pkcs11Config, Pkcs11Error, generate, pin_source};
use verifier_sdk::{Address, Bytes32};

/// A logged-in session on the token holding the verifier key; the key stays in the token.
#[derive(Debug)]
pub struct Pkcs11Signer(pkcs11_key::Pkcs11Key);

impl Pkcs11Signer {
    /// Logs in to the token and finds the key (see [`pkcs11_key::Pkcs11Key::open`]); the
    /// caller compares its address with `--signer`.
    pub fn open(cfg: &Pkcs11Config) -> Result<Self, Pkcs11Error> {
        pkcs11_key::Pkcs11Key::open(cfg).map(Self)
    }

    /// The address of the token's key.
    pub fn address(&self) -> Address {
        Address::from_bytes(self.0.address())
    }

    /// Signs `digest` in the token; 65 bytes with low `s` and `v` ∈ {27, 28} recovering to
    /// the key's address.
    pub fn sign_digest(&self, digest: &Bytes32) -> Result<[u8; 65], Pkcs11Error> {
        let mut raw = self.0.sign_prehash(digest.as_bytes())?;
        raw[64] += 27;
        Ok(raw)
    }
}
