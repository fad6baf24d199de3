//! Which git revision each tree of a rehearsal is staged at.
//!
//! `--rev` used to apply to every tree, the base too, so `--source repo --rev X --base repo`
//! staged the same commit twice and blamed the benchmark for not telling a tree from itself.
//! The source and benchmark are staged at `--rev` (default `HEAD`); the base at its own
//! revision: `--base-rev REV`, or `--base DIR@REV`, default `HEAD`. Whether a revision was asked
//! for also decides the words: staging an explicit revision is not a working copy to commit.

use std::path::{Path, PathBuf};

/// The base tree's directory and revision, from `--base` and `--base-rev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseSpec {
    /// The directory.
    pub dir: PathBuf,
    /// The revision asked for (`--base-rev`, or the `@REV` of `--base`), if any.
    pub rev: Option<String>,
}

/// Why `--base` and `--base-rev` do not make one base.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BaseSpecError {
    /// Both `--base DIR@REV` and `--base-rev` name a revision.
    #[error("--base {given:?} names a revision after @ and --base-rev names {rev:?}: give it once")]
    TwoRevisions {
        /// The `--base` argument.
        given: String,
        /// The `--base-rev` argument.
        rev: String,
    },
}

/// `--base` as given (a directory, or `DIR@REV` when the whole does not exist but `DIR` does)
/// with `--base-rev`.
pub fn base_spec(base: &Path, base_rev: Option<&str>) -> Result<BaseSpec, BaseSpecError> {
    let split = split_at_rev(base);
    match (split, base_rev) {
        (Some((dir, rev)), None) => Ok(BaseSpec {
            dir,
            rev: Some(rev),
        }),
        (Some(_), Some(rev)) => Err(BaseSpecError::TwoRevisions {
            given: base.display().to_string(),
            rev: rev.to_owned(),
        }),
        (None, rev) => Ok(BaseSpec {
            dir: base.to_path_buf(),
            rev: rev.map(str::to_owned),
        }),
    }
}

/// `DIR@REV` split at its last `@`, when `DIR@REV` itself does not exist and `DIR` is a
/// directory: a directory whose name holds an `@` is still taken as a directory.
fn split_at_rev(base: &Path) -> Option<(PathBuf, String)> {
    if base.exists() {
        return None;
    }
    let text = base.to_str()?;
    let (dir, rev) = text.rsplit_once('@')?;
    if dir.is_empty() || rev.is_empty() || !Path::new(dir).is_dir() {
        return None;
    }
    Some((PathBuf::from(dir), rev.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dir_at_rev_splits_only_when_the_whole_is_not_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let with_at = tmp.path().join("name@odd");
        std::fs::create_dir(&with_at).unwrap();
        let at = |s: &str| PathBuf::from(format!("{}{s}", repo.display()));
        assert_eq!(
            base_spec(&at("@HEAD~1"), None).unwrap(),
            BaseSpec {
                dir: repo.clone(),
                rev: Some("HEAD~1".into())
            }
        );
        assert_eq!(base_spec(&with_at, None).unwrap().dir, with_at);
        assert_eq!(
            base_spec(&repo, Some("v1")).unwrap().rev.as_deref(),
            Some("v1")
        );
        assert!(matches!(
            base_spec(&at("@a"), Some("b")),
            Err(BaseSpecError::TwoRevisions { .. })
        ));
        // Neither the whole nor the part before @ exists: left to staging to refuse.
        let missing = tmp.path().join("missing@x");
        assert_eq!(base_spec(&missing, None).unwrap().dir, missing);
    }
}
