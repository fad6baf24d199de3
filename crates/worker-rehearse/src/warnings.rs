//! Warnings a reader must see next to the verdict, not only where a tree's staging is listed.
//!
//! A solver's uncommitted work is not in what ran (a tree inside a git repository is staged as
//! its commit), and the warning sat twenty lines above a failure that named the very file they
//! had just written. So it is repeated under the verdict, naming the changed files.

use super::git::TreeOrigin;

/// Changed files named in a warning; the rest are counted.
const LISTED: usize = 5;

/// One line per tree whose working tree differs from the commit staged by default (an
/// explicitly asked revision is what the author wanted and gets none).
pub fn worktree_warnings(trees: &[TreeOrigin]) -> Vec<String> {
    trees
        .iter()
        .filter(|t| t.worktree_differs && t.asked_revision.is_none())
        .map(|t| {
            let files = match t.changed_files.len() {
                0 => "another commit is checked out".to_owned(),
                n => {
                    let shown: Vec<&str> = t
                        .changed_files
                        .iter()
                        .take(LISTED)
                        .map(String::as_str)
                        .collect();
                    let more = if n > LISTED {
                        format!(" and {} more", n - LISTED)
                    } else {
                        String::new()
                    };
                    format!("changed: {}{more}", shown.join(", "))
                }
            };
            format!(
                "warning: the {}'s working tree differs from the staged commit: what ran is the \
                 commit, not the files on disk ({files}); commit them, or pass --worktree",
                t.tree
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(differs: bool, asked: Option<&str>, files: &[&str]) -> TreeOrigin {
        TreeOrigin {
            tree: "source",
            origin: "git",
            repository: Some("/r".into()),
            revision: Some("a".repeat(40)),
            subdirectory: Some(".".into()),
            worktree_differs: differs,
            asked_revision: asked.map(str::to_owned),
            changed_files: files.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    #[test]
    fn only_a_default_revision_with_a_differing_working_tree_is_warned_about() {
        assert!(worktree_warnings(&[origin(false, None, &[])]).is_empty());
        assert!(worktree_warnings(&[origin(true, Some("v1"), &["a"])]).is_empty());
        let files = ["a", "b", "c", "d", "e", "f", "g"];
        let lines = worktree_warnings(&[origin(true, None, &files)]);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("(changed: a, b, c, d, e and 2 more)"),
            "{lines:?}"
        );
    }
}
