//! A fresh SoftHSM2 token of its own for a PKCS#11 test (issue #44 items 3 and 4): its own
//! token directory and configuration in a temporary directory, initialised with
//! `softhsm2-util`, and its PIN in a 0600 file the binaries' `--pkcs11-pin-file` accepts.
//!
//! SoftHSM2 reads its configuration from the environment only, which a test cannot set on
//! itself (edition 2024's `set_var` is unsafe): the tests run every PKCS#11 call in a child
//! process given `SOFTHSM2_CONF` = [`SoftHsmToken::conf`]: [`SoftHsmToken::keygen`] runs a
//! binary's `pkcs11-keygen` (the signer and the keeper spell it and its flags the same).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian and Ubuntu install the module.
pub const MODULES: [&str; 2] = [
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
];

/// Why a token could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SoftHsmError {
    /// SoftHSM2 is missing where it must be there (`CI=true`).
    #[error("SoftHSM2 is not installed (apt-get install softhsm2; scripts/services.sh does)")]
    Missing,
    /// The temporary directory, configuration or PIN file could not be written.
    #[error("softhsm2 test files: {0}")]
    Io(#[from] std::io::Error),
    /// `softhsm2-util --init-token` failed.
    #[error("softhsm2-util --init-token failed: {0}")]
    Init(String),
}

/// An initialised token in a temporary directory, removed when dropped.
#[derive(Debug)]
pub struct SoftHsmToken {
    dir: tempfile::TempDir,
    module: &'static str,
    token: String,
}

impl SoftHsmToken {
    /// A token labelled `token` whose user PIN is `pin`; `Ok(None)` (skip) when SoftHSM2 is
    /// not installed, unless `CI=true`, where a missing module is an error and the test fails.
    pub fn init(token: &str, pin: &str) -> Result<Option<Self>, SoftHsmError> {
        let Some(module) = MODULES.into_iter().find(|m| Path::new(m).exists()) else {
            if std::env::var("CI").as_deref() == Ok("true") {
                return Err(SoftHsmError::Missing);
            }
            eprintln!("skipped: SoftHSM2 is not installed");
            return Ok(None);
        };
        let dir = tempfile::tempdir()?;
        let tokens = dir.path().join("tokens");
        std::fs::create_dir(&tokens)?;
        std::fs::write(
            dir.path().join("softhsm2.conf"),
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                tokens.display()
            ),
        )?;
        let pin_file = dir.path().join("pin");
        std::fs::write(&pin_file, format!("{pin}\n"))?;
        std::fs::set_permissions(&pin_file, std::fs::Permissions::from_mode(0o600))?;
        let hsm = Self {
            dir,
            module,
            token: token.to_owned(),
        };
        let out = Command::new("softhsm2-util")
            .args(["--init-token", "--free", "--label", token])
            .args(["--so-pin", &format!("so-{pin}"), "--pin", pin])
            .env("SOFTHSM2_CONF", hsm.conf())
            .output()?;
        if !out.status.success() {
            return Err(SoftHsmError::Init(format!("{out:?}")));
        }
        Ok(Some(hsm))
    }

    /// The module's path (`--pkcs11-module`).
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// The configuration file the child processes need as `SOFTHSM2_CONF`.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    /// The 0600 file holding the PIN (`--pkcs11-pin-file`).
    pub fn pin_file(&self) -> PathBuf {
        self.dir.path().join("pin")
    }

    /// The flags naming the key `label` in this token, the PIN from [`Self::pin_file`]; the
    /// same spelling for `signer` and `keeper`.
    pub fn flags(&self, label: &str) -> Vec<String> {
        vec![
            "--pkcs11-module".to_owned(),
            self.module.to_owned(),
            "--pkcs11-token".to_owned(),
            self.token.clone(),
            "--pkcs11-key-label".to_owned(),
            label.to_owned(),
            "--pkcs11-pin-file".to_owned(),
            self.pin_file().display().to_string(),
        ]
    }

    /// `BIN pkcs11-keygen` with [`Self::flags`] for `label`, in this token: the process's
    /// output, to read the address from or the refusal.
    pub fn keygen(&self, bin: &str, label: &str) -> std::io::Result<Output> {
        Command::new(bin)
            .arg("pkcs11-keygen")
            .args(self.flags(label))
            .env("SOFTHSM2_CONF", self.conf())
            .output()
    }
}
