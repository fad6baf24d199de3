//! The `signer` binary's exit codes, of the numbering the three binaries share
//! ([`cli_support::exit`]: 3 is `NotDone`, 6 `Differs`), mapped to the process status only in
//! `main`, never renumbered.
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

pub use cli_support::exit::ExitCode;
