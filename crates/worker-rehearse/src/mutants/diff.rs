//! The lines a solution changes: the lines of the new file that a longest common subsequence
//! with the base file does not keep. Pure.

/// Most cells of the LCS table computed for one file; above it (two files of ~2,000 lines
/// differing throughout) every line between the common prefix and suffix counts as changed,
/// which is what an author changing that much of a file means anyway.
pub const MAX_LCS_CELLS: usize = 4_000_000;

/// The 0-based indexes of `new`'s lines that are not in `base` (a line changed or added).
pub fn changed_lines(base: &[&str], new: &[&str]) -> Vec<usize> {
    let prefix = base.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = base[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_mid, new_mid) = (
        &base[prefix..base.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    if old_mid.is_empty() {
        return (prefix..prefix + new_mid.len()).collect();
    }
    if old_mid.len().saturating_mul(new_mid.len()) > MAX_LCS_CELLS {
        return (prefix..prefix + new_mid.len()).collect();
    }
    // lcs[i][j]: the LCS length of old_mid[i..] and new_mid[j..].
    let (n, m) = (old_mid.len(), new_mid.len());
    let width = m + 1;
    let mut lcs = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if old_mid[i] == new_mid[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let mut changed = Vec::new();
    let (mut i, mut j) = (0, 0);
    while j < m {
        if i < n && old_mid[i] == new_mid[j] {
            i += 1;
            j += 1;
        } else if i < n && lcs[(i + 1) * width + j] >= lcs[i * width + j + 1] {
            i += 1;
        } else {
            changed.push(prefix + j);
            j += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_added_and_changed_lines_of_the_new_file_count() {
        let base = ["a", "b", "c", "d", "e"];
        let new = ["a", "B", "c", "x", "d", "e", "f"];
        assert_eq!(changed_lines(&base, &new), [1, 3, 6]);
    }

    #[test]
    fn a_new_file_is_all_changed_and_an_unchanged_one_not_at_all() {
        assert_eq!(changed_lines(&[], &["a", "b"]), [0, 1]);
        assert!(changed_lines(&["a", "b"], &["a", "b"]).is_empty());
        assert!(changed_lines(&["a", "b"], &["a"]).is_empty());
    }

    #[test]
    fn a_moved_block_is_changed_where_it_lands() {
        let base = ["x", "y", "1", "2", "3"];
        let new = ["1", "2", "3", "x", "y"];
        assert_eq!(changed_lines(&base, &new), [3, 4]);
    }
}
