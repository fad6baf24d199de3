//! Process exit codes of the `signer` binary. Defined once here, mapped to the process status
//! only in `main`, never renumbered.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | every candidate was signed, or legitimately not ours (this signer is not an eligible verifier of its job); an empty manifest is 0 |
//! | 1 | internal failure (a bug, or the attestation output could not be written); the signing history is held by another signer, or could not be read or written |
//! | 2 | usage: the command line could not be parsed |
//! | 3 | at least one candidate was refused (job changed or gone, on-chain mismatch, deadline too close, digest disagreement, …); the others were still signed; the report names each refusal's code |
//! | 4 | invalid input: the candidates directory or its manifest is missing, unreadable, malformed, or for another network; for `signer agree`, a candidate file that is unreadable, not a candidate, or whose outcome is no run of its job |
//! | 5 | the RPC, the platform API or the `--remote-signer` was unavailable (for at least one candidate, or at the start for the remote signer; takes precedence over 3: a retry may sign it) |
//! | 6 | `signer agree` only: the two candidates disagree on the job, the verdict or a receipt commitment |
//! | 10 | a candidate's verdict contradicts a signature this key already made for the same scope (chain, contract, bounty id, round, submission): refused (code `contradicts_history`, naming the earlier signature), nothing signed for it; takes precedence over every other per-candidate code. `signer history import`: the file contradicts the store, nothing imported |
//! | 78 | configuration or credential problem a restart will not fix: the signing history is missing (never created implicitly), corrupt or not a signing history; a `--remote-signer` that does not list `--signer` among its accounts; a PKCS#11 module, token, PIN or key that is unusable (no token or key with the label, another curve, a refused PIN) or whose key's address ≠ `--signer`; `pkcs11-keygen`: the label already taken; key missing, malformed, in a file with mode wider than 0600 or a symlink, key address ≠ `--signer`, invalid RPC or API URL (the API must be https unless loopback) |

/// An exit status of the signer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ExitCode {
    /// All candidates signed or not ours.
    Success = 0,
    /// Unexpected internal failure.
    Internal = 1,
    /// The command line could not be parsed.
    Usage = 2,
    /// Some candidates were refused.
    Refused = 3,
    /// The candidates directory is unusable.
    InvalidInput = 4,
    /// RPC or API unavailable.
    Unavailable = 5,
    /// `signer agree`: the candidates disagree.
    Disagrees = 6,
    /// A verdict contradicts the signing history.
    ContradictsHistory = 10,
    /// Configuration or credential problem.
    Config = 78,
}

impl ExitCode {
    /// The numeric process exit code.
    pub const fn code(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::ExitCode;

    #[test]
    fn exit_codes_are_never_renumbered() {
        assert_eq!(ExitCode::Success.code(), 0);
        assert_eq!(ExitCode::Internal.code(), 1);
        assert_eq!(ExitCode::Usage.code(), 2);
        assert_eq!(ExitCode::Refused.code(), 3);
        assert_eq!(ExitCode::InvalidInput.code(), 4);
        assert_eq!(ExitCode::Unavailable.code(), 5);
        assert_eq!(ExitCode::Disagrees.code(), 6);
        assert_eq!(ExitCode::ContradictsHistory.code(), 10);
        assert_eq!(ExitCode::Config.code(), 78);
    }
}
