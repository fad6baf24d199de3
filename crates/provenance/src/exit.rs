//! `verify-provenance`'s exit codes, of the numbering the binaries share
//! ([`cli_support::exit`]; the `verify-provenance` column of docs/reference.md "Exit codes",
//! which that module's test holds to it), mapped to the process status only in `main`; never
//! renumbered.
//!
//! | code | variant        | meaning |
//! |------|----------------|---------|
//! | 0    | `Success`      | the bundle vouches for the artifact: certificate chain to the pinned root, signature, transparency log, subject digest, SLSA provenance, identity, issuer, commit, ref, GitHub-hosted runner |
//! | 2    | `Usage`        | the command line could not be parsed |
//! | 4    | `InvalidInput` | refused: any of those checks failed, or the bundle or artifact is missing, a symbolic link or unreadable; the artifact must not be installed or run |
//! | 78   | `Config`       | the trusted root file is missing, unreadable or no Sigstore trusted root: nothing can be verified until it is fixed |
//!
//! A refusal is 4, not 3 ("not done, retry later"): it is a verdict on the files given, and the
//! same files are refused again. It was 1 before issue #48, which the other binaries mean as an
//! internal error a restart may fix.

pub use cli_support::exit::ExitCode;
