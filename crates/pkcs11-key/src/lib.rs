//! A secp256k1 key inside a PKCS#11 token (an HSM, or SoftHSM2 in the tests) that never
//! leaves it: the signer's verifier key and the keeper's gas key (issue #44 items 3 and 4).
//!
//! The token computes raw ECDSA (`CKM_ECDSA`) over a 32-byte prehash (an EIP-712 digest for
//! the signer, a transaction's signing hash for the keeper) and returns `r ‖ s`; everything
//! Ethereum adds is done here: `s` is folded into the low half (contracts and nodes refuse a
//! high `s`) and the recovery id is found by trying both and keeping the one that recovers to
//! the key's address. The address itself comes from the token's public key object
//! (`CKA_EC_POINT`), read once when the key is opened, so a token without the named key, or
//! a key on another curve, fails before its caller reads any input; the caller compares the
//! address with the one it was configured for.
//!
//! What this crate deliberately does not do: read, wrap or export the private key (the
//! template makes it sensitive and non-extractable), initialise tokens (an operator's step),
//! take the PIN from anywhere but [`keyfile::load_secret_text`] (a variable or a 0600 file),
//! or know what it signs (typed data or transactions are the callers' business).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use keyfile::KeySource;
use sha3::{Digest, Keccak256};

/// An Ethereum address, as the 20 bytes the key's public point hashes to.
pub type Address = [u8; 20];

/// DER of the secp256k1 OID 1.3.132.0.10, the `CKA_EC_PARAMS` of an Ethereum key.
pub const SECP256K1_PARAMS: [u8; 7] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x0A];

/// Why the PKCS#11 backend could not be opened or could not sign. No variant carries the PIN.
#[derive(Debug, thiserror::Error)]
pub enum Pkcs11Error {
    /// The PIN could not be read (variable missing, file wider than 0600, …).
    #[error("PKCS#11 PIN: {0}")]
    Pin(#[source] keyfile::KeyError),
    /// The module could not be loaded or initialised.
    #[error("PKCS#11 module {path}: {detail}")]
    Module {
        /// `--pkcs11-module`.
        path: PathBuf,
        /// The loader's or the module's error.
        detail: String,
    },
    /// No slot holds a token with this label.
    #[error("no PKCS#11 token labelled {0:?}")]
    NoToken(String),
    /// A call into the token failed (login refused, session closed, …).
    #[error("PKCS#11 token {token:?}: {call}: {detail}")]
    Token {
        /// The token label.
        token: String,
        /// What was asked.
        call: &'static str,
        /// The module's answer (a CKR_ code).
        detail: String,
    },
    /// The token holds no secp256k1 private key with this label.
    #[error("PKCS#11 token {token:?} holds no EC private key labelled {label:?}")]
    NoKey {
        /// The token label.
        token: String,
        /// `--pkcs11-key-label`.
        label: String,
    },
    /// The label names more than one key: which one signs would be the module's choice.
    #[error(
        "PKCS#11 token {token:?} holds {count} {class} keys labelled {label:?}; exactly one is required"
    )]
    Ambiguous {
        /// The token label.
        token: String,
        /// The key label.
        label: String,
        /// `private` or `public`.
        class: &'static str,
        /// How many.
        count: usize,
    },
    /// The private key has no public key object beside it to take the address from.
    #[error(
        "PKCS#11 token {token:?} holds no public key labelled {label:?} (needed for the address)"
    )]
    NoPublicKey {
        /// The token label.
        token: String,
        /// The key label.
        label: String,
    },
    /// The key is not on secp256k1, or its public point is malformed.
    #[error("PKCS#11 key {label:?} is not a secp256k1 key: {detail}")]
    NotSecp256k1 {
        /// The key label.
        label: String,
        /// What differs.
        detail: String,
    },
    /// `pkcs11-keygen` found an object with the label already.
    #[error(
        "PKCS#11 token {token:?} already holds an object labelled {label:?}; nothing generated"
    )]
    LabelTaken {
        /// The token label.
        token: String,
        /// The key label.
        label: String,
    },
    /// The token's signature is not 64 bytes, or recovers to no v for the key's address.
    #[error("PKCS#11 token {token:?} returned an unusable signature: {detail}")]
    Signature {
        /// The token label.
        token: String,
        /// What was wrong.
        detail: String,
    },
}

/// Where the key is: the module, the token and the key's label, and where the PIN is.
#[derive(Debug, Clone)]
pub struct Pkcs11Config {
    /// The PKCS#11 module (a shared library) to load.
    pub module: PathBuf,
    /// The token's label (`CKA_LABEL` of the token, as `softhsm2-util --show-slots` lists it).
    pub token: String,
    /// The key's `CKA_LABEL`.
    pub key_label: String,
    /// The user PIN's variable or 0600 file.
    pub pin: KeySource,
}

/// A logged-in session on the token holding the key; the key stays in the token.
pub struct Pkcs11Key {
    // Kept so the module stays loaded and initialised for as long as the session lives.
    _context: Pkcs11,
    session: Mutex<Session>,
    key: ObjectHandle,
    token: String,
    label: String,
    address: Address,
}

impl std::fmt::Debug for Pkcs11Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs11Key")
            .field("token", &self.token)
            .field("label", &self.label)
            .field("address", &hex_address(&self.address))
            .finish_non_exhaustive()
    }
}

fn token_error(
    token: &str,
    call: &'static str,
) -> impl FnOnce(cryptoki::error::Error) -> Pkcs11Error {
    let token = token.to_owned();
    move |e| Pkcs11Error::Token {
        token,
        call,
        detail: e.to_string(),
    }
}

/// Loads the module, finds the token by label, opens a session and logs in as the user.
fn login(cfg: &Pkcs11Config, read_write: bool) -> Result<(Pkcs11, Session), Pkcs11Error> {
    let pin = keyfile::load_secret_text(&cfg.pin).map_err(Pkcs11Error::Pin)?;
    let module_error = |detail: String| Pkcs11Error::Module {
        path: cfg.module.clone(),
        detail,
    };
    let context = Pkcs11::new(&cfg.module).map_err(|e| module_error(e.to_string()))?;
    context
        .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .map_err(|e| module_error(e.to_string()))?;
    let slots = context
        .get_slots_with_token()
        .map_err(token_error(&cfg.token, "C_GetSlotList"))?;
    let mut found = None;
    for slot in slots {
        let info = context
            .get_token_info(slot)
            .map_err(token_error(&cfg.token, "C_GetTokenInfo"))?;
        if info.label().trim_end() == cfg.token {
            found = Some(slot);
            break;
        }
    }
    let slot = found.ok_or_else(|| Pkcs11Error::NoToken(cfg.token.clone()))?;
    let session = if read_write {
        context.open_rw_session(slot)
    } else {
        context.open_ro_session(slot)
    }
    .map_err(token_error(&cfg.token, "C_OpenSession"))?;
    // AuthPin is a zeroizing secret; the zeroizing text it is made from drops right after.
    let auth = AuthPin::from(pin.as_str());
    session
        .login(UserType::User, Some(&auth))
        .map_err(token_error(&cfg.token, "C_Login"))?;
    Ok((context, session))
}

/// The one object of `class` labelled `label`, if any.
fn find_one(
    session: &Session,
    cfg: &Pkcs11Config,
    class: ObjectClass,
) -> Result<Option<ObjectHandle>, Pkcs11Error> {
    let found = session
        .find_objects(&[
            Attribute::Class(class),
            Attribute::KeyType(KeyType::EC),
            Attribute::Label(cfg.key_label.as_bytes().to_vec()),
        ])
        .map_err(token_error(&cfg.token, "C_FindObjects"))?;
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        more => Err(Pkcs11Error::Ambiguous {
            token: cfg.token.clone(),
            label: cfg.key_label.clone(),
            class: if class == ObjectClass::PRIVATE_KEY {
                "private"
            } else {
                "public"
            },
            count: more.len(),
        }),
    }
}

/// The address of the public key object `public`: its curve must be secp256k1.
fn address_of(
    session: &Session,
    cfg: &Pkcs11Config,
    public: ObjectHandle,
) -> Result<Address, Pkcs11Error> {
    let not_k1 = |detail: &str| Pkcs11Error::NotSecp256k1 {
        label: cfg.key_label.clone(),
        detail: detail.to_owned(),
    };
    let attributes = session
        .get_attributes(public, &[AttributeType::EcParams, AttributeType::EcPoint])
        .map_err(token_error(&cfg.token, "C_GetAttributeValue"))?;
    let mut params = None;
    let mut point = None;
    for attribute in attributes {
        match attribute {
            Attribute::EcParams(p) => params = Some(p),
            Attribute::EcPoint(p) => point = Some(p),
            _ => {}
        }
    }
    if params.as_deref() != Some(&SECP256K1_PARAMS[..]) {
        return Err(not_k1("CKA_EC_PARAMS is not the secp256k1 OID"));
    }
    let point = point.ok_or_else(|| not_k1("no CKA_EC_POINT"))?;
    address_from_ec_point(&point).ok_or_else(|| not_k1("CKA_EC_POINT is not an uncompressed point"))
}

/// The Ethereum address of a `CKA_EC_POINT`: a DER OCTET STRING around the uncompressed
/// point (PKCS#11 2.40), or the bare point some modules return. `None` for anything else,
/// including a point not on the curve.
pub fn address_from_ec_point(point: &[u8]) -> Option<Address> {
    let raw = match point {
        [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
        _ if point.len() == 65 => point,
        _ => return None,
    };
    // Parsed so a token cannot hand over a point that is no public key.
    k256::PublicKey::from_sec1_bytes(raw).ok()?;
    let (tag, xy) = raw.split_first()?;
    if *tag != 0x04 {
        return None;
    }
    let hash = Keccak256::digest(xy);
    let mut address = [0u8; 20];
    address.copy_from_slice(hash.get(12..)?);
    Some(address)
}

/// The address of a verifying key.
fn address_of_key(key: &VerifyingKey) -> Option<Address> {
    address_from_ec_point(key.to_encoded_point(false).as_bytes())
}

/// `0x` and 40 lowercase hex digits, for messages.
pub fn hex_address(address: &Address) -> String {
    let mut text = String::with_capacity(42);
    text.push_str("0x");
    for byte in address {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// Turns the token's `r ‖ s` into `r ‖ s ‖ recovery id`: `s` in the low half, and the
/// recovery id (0 or 1) whose recovery over `digest` gives `address` (tried, not guessed: the
/// token does not say). Callers add what their format adds (27 for an attestation's `v`, the
/// y parity of a typed transaction).
pub fn ethereum_signature(
    rs: &[u8],
    digest: &[u8; 32],
    address: Address,
) -> Result<[u8; 65], String> {
    if rs.len() != 64 {
        return Err(format!("{} bytes, not r ‖ s of 64", rs.len()));
    }
    let signature = Signature::from_slice(rs).map_err(|_| "r or s is out of range".to_owned())?;
    let low = signature.normalize_s().unwrap_or(signature);
    for id in 0u8..2 {
        let Some(recovery) = RecoveryId::from_byte(id) else {
            continue;
        };
        let recovered = VerifyingKey::recover_from_prehash(digest, &low, recovery)
            .ok()
            .and_then(|key| address_of_key(&key));
        if recovered == Some(address) {
            let mut raw = [0u8; 65];
            raw[..64].copy_from_slice(&low.to_bytes());
            raw[64] = id;
            return Ok(raw);
        }
    }
    Err(format!(
        "recovers to {} with neither recovery id",
        hex_address(&address)
    ))
}

impl Pkcs11Key {
    /// Logs in to the token and finds the key: one EC private key labelled `key_label`, and
    /// its public key object, on secp256k1. The address is the public key's; the caller
    /// compares it with `--signer`.
    pub fn open(cfg: &Pkcs11Config) -> Result<Self, Pkcs11Error> {
        let (context, session) = login(cfg, false)?;
        let no_key = || Pkcs11Error::NoKey {
            token: cfg.token.clone(),
            label: cfg.key_label.clone(),
        };
        let key = find_one(&session, cfg, ObjectClass::PRIVATE_KEY)?.ok_or_else(no_key)?;
        let public = find_one(&session, cfg, ObjectClass::PUBLIC_KEY)?.ok_or_else(|| {
            Pkcs11Error::NoPublicKey {
                token: cfg.token.clone(),
                label: cfg.key_label.clone(),
            }
        })?;
        let address = address_of(&session, cfg, public)?;
        Ok(Self {
            _context: context,
            session: Mutex::new(session),
            key,
            token: cfg.token.clone(),
            label: cfg.key_label.clone(),
            address,
        })
    }

    /// The address of the token's key.
    pub fn address(&self) -> Address {
        self.address
    }

    /// Signs the 32-byte prehash `digest` in the token: `r ‖ s ‖ recovery id` with low `s`
    /// and the id (0 or 1) recovering to the key's address.
    pub fn sign_prehash(&self, digest: &[u8; 32]) -> Result<[u8; 65], Pkcs11Error> {
        let rs = {
            let session = self.session.lock().map_err(|_| Pkcs11Error::Signature {
                token: self.token.clone(),
                detail: "the session lock was poisoned".into(),
            })?;
            session
                .sign(&Mechanism::Ecdsa, self.key, digest)
                .map_err(token_error(&self.token, "C_Sign"))?
        };
        ethereum_signature(&rs, digest, self.address).map_err(|detail| Pkcs11Error::Signature {
            token: self.token.clone(),
            detail,
        })
    }
}

/// Generates a secp256k1 key pair in the token under `key_label` (`CKM_EC_KEY_PAIR_GEN`): the
/// private key sensitive, never extractable, for signing only. Refused when the label is
/// taken. Returns the address.
pub fn generate(cfg: &Pkcs11Config) -> Result<Address, Pkcs11Error> {
    let (_context, session) = login(cfg, true)?;
    let taken = session
        .find_objects(&[Attribute::Label(cfg.key_label.as_bytes().to_vec())])
        .map_err(token_error(&cfg.token, "C_FindObjects"))?;
    if !taken.is_empty() {
        return Err(Pkcs11Error::LabelTaken {
            token: cfg.token.clone(),
            label: cfg.key_label.clone(),
        });
    }
    let label = Attribute::Label(cfg.key_label.as_bytes().to_vec());
    let public_template = [
        Attribute::Token(true),
        Attribute::Verify(true),
        Attribute::EcParams(SECP256K1_PARAMS.to_vec()),
        label.clone(),
    ];
    let private_template = [
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        label,
    ];
    let (public, _private) = session
        .generate_key_pair(
            &Mechanism::EccKeyPairGen,
            &public_template,
            &private_template,
        )
        .map_err(token_error(&cfg.token, "C_GenerateKeyPair"))?;
    address_of(&session, cfg, public)
}

/// Reads the PIN source from the two flags (one is given; clap enforces it).
pub fn pin_source(env: Option<&str>, file: Option<&Path>) -> KeySource {
    match (env, file) {
        (Some(name), _) => KeySource::Env(name.to_owned()),
        (None, Some(path)) => KeySource::File(path.to_owned()),
        // Unreachable under clap's group; an empty name is refused as an invalid variable.
        (None, None) => KeySource::Env(String::new()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k256::ecdsa::SigningKey;

    /// n / 2, big-endian: a low `s` is at most this.
    const HALF_ORDER: [u8; 32] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xFF, 0x5D, 0x57, 0x6E, 0x73, 0x57, 0xA4, 0x50, 0x1D, 0xDF, 0xE9, 0x2F, 0x46, 0x68, 0x1B,
        0x20, 0xA0,
    ];

    fn key() -> SigningKey {
        SigningKey::from_slice(&[0x42; 32]).unwrap()
    }

    fn address(key: &SigningKey) -> Address {
        let point = key.verifying_key().to_encoded_point(false);
        let mut der = vec![0x04, 0x41];
        der.extend_from_slice(point.as_bytes());
        address_from_ec_point(&der).unwrap()
    }

    #[test]
    fn the_address_of_an_ec_point_is_the_keys_ethereum_address() {
        let key = key();
        let local = keyfile::LoadedKey::from_hex_text(&hex::encode([0x42; 32])).unwrap();
        assert_eq!(address(&key), local.address().0.0);
        // The bare point is read the same; a compressed or truncated one is not an address.
        let point = key.verifying_key().to_encoded_point(false);
        assert_eq!(address_from_ec_point(point.as_bytes()), Some(address(&key)));
        let compressed = key.verifying_key().to_encoded_point(true);
        assert_eq!(address_from_ec_point(compressed.as_bytes()), None);
        assert_eq!(address_from_ec_point(&point.as_bytes()[..64]), None);
    }

    /// A token returns raw `r ‖ s`, high `s` about half the time: both halves, and both
    /// recovery ids, must come out as a signature recovering to the key.
    #[test]
    fn a_raw_token_signature_with_high_or_low_s_becomes_one_recovering_to_the_key() {
        let key = key();
        let addr = address(&key);
        let n = k256::Scalar::ZERO - k256::Scalar::ONE; // n - 1, to negate s below.
        let mut saw = std::collections::BTreeSet::new();
        for i in 0u8..16 {
            let digest = [i; 32];
            let (sig, recid) = key.sign_prehash_recoverable(&digest).unwrap();
            saw.insert(recid.to_byte());
            let mut rs = sig.to_bytes().to_vec();
            for flip in [false, true] {
                if flip {
                    // The same signature with s replaced by n - s: what a token may return.
                    let (r, s) = sig.split_scalars();
                    let high = Signature::from_scalars(r, *s * n).unwrap();
                    rs = high.to_bytes().to_vec();
                }
                let raw = ethereum_signature(&rs, &digest, addr).unwrap();
                let low = Signature::from_slice(&raw[..64]).unwrap();
                let recovered = VerifyingKey::recover_from_prehash(
                    &digest,
                    &low,
                    RecoveryId::from_byte(raw[64]).unwrap(),
                )
                .unwrap();
                assert_eq!(address_of_key(&recovered), Some(addr));
                assert!(raw[32..64] <= HALF_ORDER[..], "s not low");
            }
        }
        assert_eq!(saw.len(), 2, "both recovery ids were exercised");
        // For another address no id recovers: refused, not guessed.
        let digest = [1; 32];
        let (sig, _) = key.sign_prehash_recoverable(&digest).unwrap();
        assert!(ethereum_signature(&sig.to_bytes(), &digest, [7; 20]).is_err());
        assert!(ethereum_signature(&[0; 63], &digest, addr).is_err());
    }
}
