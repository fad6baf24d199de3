//! The one exit-code numbering of `worker`, `signer`, `keeper` and `verify-provenance`
//! (docs/reference.md "Exit codes" is its contract, checked against this file by a test): each
//! number means one thing across the four, a binary uses the codes its column of that table
//! names, and the `code` of its `--json` error object is that binary's name of the number
//! ([`ExitCode::name`]). Never renumbered. Libraries never name these; each binary maps its
//! libraries' typed results to them in one place.

/// A process exit code of the binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ExitCode {
    /// The command did what was asked (a verdict, `passed` or `failed`, is success).
    Success = 0,
    /// An internal failure (a bug, or local trouble a restart may fix).
    Internal = 1,
    /// The command line could not be parsed.
    Usage = 2,
    /// Not done yet, retry later: the worker's run ended without a verdict, the signer refused
    /// a candidate, the keeper's candidate is not settled.
    NotDone = 3,
    /// The input broke a rule; retrying the same input cannot help (`verify-provenance`: the
    /// artifact is refused).
    InvalidInput = 4,
    /// The engine, an RPC node, an API or a remote signer did not answer.
    Unavailable = 5,
    /// Two runs agree on what counts and differ otherwise (`worker reproduce`: the output), or
    /// (`signer agree`) the two candidates differ on the job, the verdict or a commitment.
    Differs = 6,
    /// `worker reproduce`: the reproduction disagrees on the verdict or a commitment.
    Disagrees = 7,
    /// `worker reproduce --tx`: the job's terms are not the bounty's on chain.
    TermsDiffer = 8,
    /// `worker rehearse`: the benchmark lets a non-solution pass.
    PaysNonSolution = 9,
    /// `signer`: a verdict contradicts the signing history.
    ContradictsHistory = 10,
    /// A configuration or credential problem a restart will not fix.
    Config = 78,
    /// Ended by SIGINT.
    Interrupted = 130,
    /// Ended by SIGTERM.
    Terminated = 143,
}

/// One of the binaries that share the numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `worker`.
    Worker,
    /// `signer`.
    Signer,
    /// `keeper`.
    Keeper,
    /// `verify-provenance` (crates/provenance): it has no `--json`, so its names are only the
    /// record of which codes it exits with.
    VerifyProvenance,
}

impl ExitCode {
    /// Every code, in numeric order.
    pub const ALL: [Self; 14] = [
        Self::Success,
        Self::Internal,
        Self::Usage,
        Self::NotDone,
        Self::InvalidInput,
        Self::Unavailable,
        Self::Differs,
        Self::Disagrees,
        Self::TermsDiffer,
        Self::PaysNonSolution,
        Self::ContradictsHistory,
        Self::Config,
        Self::Interrupted,
        Self::Terminated,
    ];

    /// The numeric process exit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// `binary`'s name of this code (the `code` of its `--json` error object), or `None` when
    /// `binary` never exits with it.
    pub const fn name_in(self, binary: Binary) -> Option<&'static str> {
        use Binary::{Keeper, Signer, VerifyProvenance, Worker};
        Some(match (self, binary) {
            // It judges one artifact and reports no internal failure of its own: anything but
            // a verdict, a usage error or an unusable trusted root is a panic (101), never 1.
            (Self::Internal, VerifyProvenance) => return None,
            (Self::Success, _) => "success",
            (Self::Internal, _) => "internal",
            (Self::Usage, _) => "usage",
            (Self::InvalidInput, _) => "invalid_input",
            (Self::Config, _) => "config",
            (Self::NotDone, Worker) => "no_verdict",
            (Self::NotDone, Signer) => "refused",
            (Self::NotDone, Keeper) => "not_settled",
            (Self::Unavailable, Worker) => "runtime_unavailable",
            (Self::Unavailable, Signer | Keeper) => "unavailable",
            (Self::Differs, Worker) => "output_differs",
            (Self::Differs, Signer) => "disagrees",
            (Self::Disagrees, Worker) => "disagrees",
            (Self::TermsDiffer, Worker) => "terms_differ",
            (Self::PaysNonSolution, Worker) => "pays_non_solution",
            (Self::ContradictsHistory, Signer) => "contradicts_history",
            (Self::Interrupted, Worker) => "interrupted",
            (Self::Terminated, Worker) => "terminated",
            _ => return None,
        })
    }

    /// [`Self::name_in`], for a code the binary exits with; a code it never uses still gets a
    /// stable name rather than none.
    pub const fn name(self, binary: Binary) -> &'static str {
        match self.name_in(binary) {
            Some(name) => name,
            None => "internal",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::{Binary, ExitCode};

    #[test]
    fn exit_codes_are_never_renumbered() {
        assert_eq!(
            ExitCode::ALL.map(ExitCode::code),
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 78, 130, 143]
        );
    }

    const BINARIES: [Binary; 4] = [
        Binary::Worker,
        Binary::Signer,
        Binary::Keeper,
        Binary::VerifyProvenance,
    ];

    /// docs/reference.md's "Exit codes" table: each row's codes with, per binary, whether its
    /// column gives the code a meaning (anything but `—`).
    fn documented() -> Vec<(u8, [bool; 4])> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/reference.md");
        let text = std::fs::read_to_string(path).expect("docs/reference.md");
        let table = text
            .split("\n## Exit codes\n")
            .nth(1)
            .expect("an Exit codes section")
            .split("\n## ")
            .next()
            .unwrap();
        let mut rows = Vec::new();
        for line in table.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let Ok(codes) = cells[0]
                .split(" / ")
                .map(str::parse::<u8>)
                .collect::<Result<Vec<_>, _>>()
            else {
                continue; // the header row
            };
            assert_eq!(cells.len(), 5, "a code and four binaries: {line}");
            let used = [
                cells[1] != "—",
                cells[2] != "—",
                cells[3] != "—",
                cells[4] != "—",
            ];
            rows.extend(codes.into_iter().map(|code| (code, used)));
        }
        rows
    }

    #[test]
    fn the_documented_exit_code_table_and_the_enum_agree() {
        let documented = documented();
        let codes: Vec<u8> = documented.iter().map(|(code, _)| *code).collect();
        assert_eq!(
            codes,
            ExitCode::ALL.map(ExitCode::code),
            "docs/reference.md documents exactly the enum's codes, in order"
        );
        for ((code, used), exit) in documented.into_iter().zip(ExitCode::ALL) {
            for (binary, used) in BINARIES.into_iter().zip(used) {
                assert_eq!(
                    exit.name_in(binary).is_some(),
                    used,
                    "exit {code} for {binary:?}: documented {used}, named {:?}",
                    exit.name_in(binary)
                );
            }
        }
    }
}
