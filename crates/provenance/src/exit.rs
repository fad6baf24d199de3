//! Process exit codes of `verify-provenance`. Defined once here, mapped to the process status
//! only in `main`, never renumbered (docs/reference.md, "Exit codes").
//!
//! | code | meaning |
//! |---|---|
//! | 0 | the bundle vouches for the artifact: certificate chain to the pinned root, signature, transparency log, subject digest, SLSA provenance, identity, issuer, commit, ref, GitHub-hosted runner |
//! | 1 | refused: any of those checks failed, or the bundle or artifact is missing, a symbolic link or unreadable; the artifact must not be installed or run |
//! | 2 | usage: the command line could not be parsed |
//! | 78 | the trusted root file is missing, unreadable or no Sigstore trusted root: nothing can be verified until it is fixed |

/// An exit status of `verify-provenance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// The bundle vouches for the artifact.
    Verified = 0,
    /// The artifact is refused.
    Refused = 1,
    /// The command line could not be parsed.
    Usage = 2,
    /// The trusted root is unusable.
    Config = 78,
}

impl ExitCode {
    /// Every code, in order.
    #[cfg(test)]
    const ALL: [ExitCode; 4] = [Self::Verified, Self::Refused, Self::Usage, Self::Config];
}

#[cfg(test)]
mod tests {
    use super::ExitCode;

    /// docs/reference.md's `verify-provenance` table documents exactly these codes, in order.
    #[test]
    fn the_reference_documents_exactly_these_exit_codes() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reference.md"
        ))
        .unwrap();
        let section = text
            .split("\n## `verify-provenance`\n")
            .nth(1)
            .unwrap()
            .split("\n## ")
            .next()
            .unwrap();
        let documented: Vec<u8> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" |").next())
            .filter_map(|code| code.trim().parse().ok())
            .collect();
        let defined: Vec<u8> = ExitCode::ALL.iter().map(|c| *c as u8).collect();
        assert_eq!(documented, defined);
    }
}
