//! The exit half of the boundary check: a library's Rust sources with comments and string and
//! character literals blanked, searched for the paths that end the process or name an exit code.
//!
//! A grep of the raw text would flag a library that writes `std::process::exit(3)` into a
//! program it hands to a container (`worker-rehearse`'s exit-on-load stubs do), and miss nothing
//! that blanking hides: a call cannot be inside a literal or a comment.

use std::path::{Path, PathBuf};

use super::{BoundaryError, Violation};

/// What a library must not contain outside comments and literals. A `use std::process::{…}`
/// that imports `exit` is caught by its `exit` after the path, so a bare `exit(…)` call cannot
/// hide behind an import.
const FORBIDDEN: [&str; 3] = ["process::exit", "process::abort", "process::ExitCode"];

/// Every forbidden path in the `.rs` files under `dir`.
pub(super) fn exits(krate: &str, dir: &Path) -> Result<Vec<Violation>, BoundaryError> {
    let mut files = Vec::new();
    rust_files(dir, &mut files)?;
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| BoundaryError::Source {
            path: file.clone(),
            source,
        })?;
        for (line, found) in find(&blank(&text)) {
            out.push(Violation::Exit {
                krate: krate.to_owned(),
                file: file.clone(),
                line,
                found,
            });
        }
    }
    Ok(out)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BoundaryError> {
    let entries = std::fs::read_dir(dir).map_err(|source| BoundaryError::Source {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| BoundaryError::Source {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|source| BoundaryError::Source {
            path: path.clone(),
            source,
        })?;
        if kind.is_dir() {
            rust_files(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// 1-based line and pattern of every forbidden path in blanked text, whitespace inside a path
/// (`process :: exit`) ignored.
pub(super) fn find(blanked: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    // Statements split over lines are joined per item: the compact text maps back to lines.
    let mut compact = String::new();
    let mut line_of = Vec::new();
    for (n, line) in blanked.lines().enumerate() {
        for c in line.chars().filter(|c| !c.is_whitespace()) {
            compact.push(c);
            // One entry per byte: `match_indices` answers in bytes.
            line_of.extend(std::iter::repeat_n(n + 1, c.len_utf8()));
        }
    }
    for pattern in FORBIDDEN {
        for (at, _) in compact.match_indices(pattern) {
            let preceded_by_ident = compact[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let followed_by_ident = compact[at + pattern.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if !preceded_by_ident && !followed_by_ident {
                out.push((line_of.get(at).copied().unwrap_or(0), pattern));
            }
        }
    }
    let imports = compact.match_indices("process::{");
    for (at, _) in imports {
        let rest = &compact[at + "process::{".len()..];
        let group = rest.split('}').next().unwrap_or_default();
        for item in group.split(',') {
            let item = item.split("as").next().unwrap_or_default();
            if let Some(found) = FORBIDDEN
                .iter()
                .find(|p| p.strip_prefix("process::") == Some(item))
            {
                out.push((line_of.get(at).copied().unwrap_or(0), found));
            }
        }
    }
    out.sort();
    out
}

/// `text` with every comment and string, byte-string, raw-string and character literal replaced
/// by spaces (line breaks kept, so line numbers hold).
pub(super) fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_break = |c: char| if c == '\n' { '\n' } else { ' ' };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while let Some(&c) = chars.get(i) {
                if c == '\n' {
                    break;
                }
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while let Some(&c) = chars.get(i) {
                let next = chars.get(i + 1).copied();
                if c == '/' && next == Some('*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c == '*' && next == Some('/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep_break(c));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && !i
                .checked_sub(1)
                .and_then(|p| chars.get(p))
                .is_some_and(|&p| ident(p) && p != 'b')
        {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                // `r#ident`, a raw identifier.
                out.push(c);
                i += 1;
                continue;
            }
            let body = i + 2 + hashes;
            out.extend(std::iter::repeat_n(' ', body - i));
            i = body;
            while let Some(&c) = chars.get(i) {
                let closes = c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#'));
                if closes {
                    out.extend(std::iter::repeat_n(' ', 1 + hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(keep_break(c));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while let Some(&c) = chars.get(i) {
                if c == '\\' {
                    out.push(' ');
                    if let Some(&escaped) = chars.get(i + 1) {
                        out.push(keep_break(escaped));
                    }
                    i += 2;
                } else if c == '"' {
                    out.push(' ');
                    i += 1;
                    break;
                } else {
                    out.push(keep_break(c));
                    i += 1;
                }
            }
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{..}'), or a lifetime or label, kept.
            let literal_end = if next == Some('\\') {
                // The escaped character itself may be a quote ('\'').
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|p| i + 3 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match literal_end {
                Some(end) => {
                    out.extend(std::iter::repeat_n(' ', end + 1 - i));
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}
