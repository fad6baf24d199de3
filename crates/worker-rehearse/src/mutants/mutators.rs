//! The line-level mutators of `rehearse --mutants`: pure functions from one line of a
//! solution's source to the lines a plausible mistake would leave there.
//!
//! Each mutator is a small, language-aware text edit, not a parser: operators are matched only
//! outside string literals and comments, and with the spaces every common formatter puts
//! around them (` < `, ` && `), so that `Vec<u8>` or `a->b` is never taken for a comparison.
//! A mutant that is bound not to build (deleting a line that opens a block, an `import`) is
//! not made: it would be "killed" without telling anything about the benchmark.

use serde::Serialize;

/// One kind of mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mutator {
    /// An early `return` dropped (Python: replaced by `pass`; `if c { return x; }` loses the
    /// `return x;`).
    DropReturn,
    /// The returned value replaced by the language's empty one (`None`, `undefined`,
    /// `Default::default()`, `nil`).
    EmptyReturn,
    /// `==` and `!=` swapped (`is`/`is not`, shell's `-eq`/`-ne`); Python's `not` dropped.
    NegateComparison,
    /// `<` and `<=`, `>` and `>=` swapped.
    Boundary,
    /// `&&` and `||` (Python's `and` and `or`) swapped.
    SwapLogical,
    /// `true` and `false` (Python's `True` and `False`) swapped.
    SwapBoolean,
    /// The line deleted (Python: replaced by `pass`, which keeps a block's indentation valid).
    DeleteLine,
}

impl Mutator {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DropReturn => "drop_return",
            Self::EmptyReturn => "empty_return",
            Self::NegateComparison => "negate_comparison",
            Self::Boundary => "boundary",
            Self::SwapLogical => "swap_logical",
            Self::SwapBoolean => "swap_boolean",
            Self::DeleteLine => "delete_line",
        }
    }
}

/// The languages the mutators know, chosen from a file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// `.py`
    Python,
    /// `.rs`
    Rust,
    /// JavaScript and TypeScript.
    JavaScript,
    /// `.go`
    Go,
    /// `.rb`
    Ruby,
    /// `.sh`, `.bash`
    Shell,
    /// C, C++, Java, C#, Kotlin, Swift: braces, `//` comments, `"` strings.
    CLike,
}

/// The language of a file, from its extension; `None` for a file no mutator applies to.
pub fn lang_of(rel_path: &str) -> Option<Lang> {
    let ext = std::path::Path::new(rel_path).extension()?.to_str()?;
    Some(match ext {
        "py" => Lang::Python,
        "rs" => Lang::Rust,
        "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => Lang::JavaScript,
        "go" => Lang::Go,
        "rb" => Lang::Ruby,
        "sh" | "bash" => Lang::Shell,
        "c" | "h" | "cc" | "cpp" | "hpp" | "java" | "cs" | "kt" | "swift" => Lang::CLike,
        _ => return None,
    })
}

/// A mutated line: `None` when the mutator deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMutant {
    /// The mistake made.
    pub mutator: Mutator,
    /// The line that replaces the original (without its line ending); `None`: removed.
    pub line: Option<String>,
}

/// Every mutant of `line` in `lang`, in mutator order, without duplicates and without the
/// line itself (a no-op mutant would survive every benchmark).
pub fn mutate_line(line: &str, lang: Lang) -> Vec<LineMutant> {
    let code = code_mask(line, lang);
    let mut out: Vec<LineMutant> = Vec::new();
    let mut push = |mutator, mutated: Option<String>| {
        if mutated.as_deref() == Some(line) || out.iter().any(|m| m.line == mutated) {
            return;
        }
        out.push(LineMutant {
            mutator,
            line: mutated,
        });
    };
    if let Some(m) = drop_return(line, lang, &code) {
        push(Mutator::DropReturn, Some(m));
    }
    if let Some(m) = empty_return(line, lang, &code) {
        push(Mutator::EmptyReturn, Some(m));
    }
    for (from, to) in comparison_pairs(lang) {
        for m in replace_each(line, &code, from, to) {
            push(Mutator::NegateComparison, Some(m));
        }
    }
    if lang == Lang::Python {
        for m in drop_not(line, &code) {
            push(Mutator::NegateComparison, Some(m));
        }
    }
    for (from, to) in boundary_pairs(lang) {
        for m in replace_each(line, &code, from, to) {
            push(Mutator::Boundary, Some(m));
        }
    }
    for (from, to) in logical_pairs(lang) {
        for m in replace_each(line, &code, from, to) {
            push(Mutator::SwapLogical, Some(m));
        }
    }
    for (from, to) in boolean_pairs(lang) {
        for m in replace_words(line, &code, from, to) {
            push(Mutator::SwapBoolean, Some(m));
        }
    }
    if deletable(line, lang, &code) {
        // An element of a literal spread over lines (`(1000, "M"),`) is removed; a statement
        // becomes `pass`, which keeps a block of one statement valid.
        let deleted = match lang {
            Lang::Python if !line.trim_end().ends_with(',') => {
                Some(format!("{}pass", indent(line)))
            }
            _ => None,
        };
        push(Mutator::DeleteLine, deleted);
    }
    out
}

fn indent(line: &str) -> &str {
    let trimmed = line.trim_start();
    line.get(..line.len() - trimmed.len()).unwrap_or("")
}

/// For each byte of `line`, whether it is code: outside string literals and comments.
fn code_mask(line: &str, lang: Lang) -> Vec<bool> {
    let quotes: &[char] = match lang {
        Lang::Python | Lang::Ruby | Lang::Shell => &['"', '\''],
        Lang::JavaScript => &['"', '\'', '`'],
        Lang::Go => &['"', '`'],
        Lang::Rust | Lang::CLike => &['"'],
    };
    let hash_comment = matches!(lang, Lang::Python | Lang::Ruby | Lang::Shell);
    let mut mask = vec![false; line.len()];
    let mut open: Option<char> = None;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, c) in line.char_indices() {
        match open {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    open = None;
                }
            }
            None => {
                let comment = (hash_comment && c == '#')
                    || (!hash_comment && c == '/' && bytes.get(i + 1) == Some(&b'/'));
                if comment {
                    break;
                }
                if quotes.contains(&c) {
                    open = Some(c);
                } else if let Some(slot) = mask.get_mut(i..i + c.len_utf8()) {
                    slot.fill(true);
                }
            }
        }
    }
    mask
}

fn is_code(code: &[bool], at: usize, len: usize) -> bool {
    code.get(at..at + len)
        .is_some_and(|span| span.iter().all(|c| *c))
}

/// One mutant per code occurrence of `from` (a token with its surrounding spaces).
fn replace_each(line: &str, code: &[bool], from: &str, to: &str) -> Vec<String> {
    line.match_indices(from)
        .filter(|(at, _)| is_code(code, *at, from.len()))
        // ` is ` inside ` is not ` is the other direction's token.
        .filter(|(at, _)| !(from == " is " && line[at + from.len()..].starts_with("not ")))
        .map(|(at, _)| format!("{}{to}{}", &line[..at], &line[at + from.len()..]))
        .collect()
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whole words only: `true` but not `is_true` or `trueish`.
fn word_at(line: &str, at: usize, len: usize) -> bool {
    let bytes = line.as_bytes();
    let before = at == 0 || bytes.get(at - 1).is_none_or(|b| !is_word_byte(*b));
    let after = bytes.get(at + len).is_none_or(|b| !is_word_byte(*b));
    before && after
}

fn replace_words(line: &str, code: &[bool], from: &str, to: &str) -> Vec<String> {
    line.match_indices(from)
        .filter(|(at, _)| is_code(code, *at, from.len()) && word_at(line, *at, from.len()))
        .map(|(at, _)| format!("{}{to}{}", &line[..at], &line[at + from.len()..]))
        .collect()
}

fn comparison_pairs(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Python => &[
            (" == ", " != "),
            (" != ", " == "),
            (" is not ", " is "),
            (" is ", " is not "),
        ],
        Lang::Shell => &[
            (" -eq ", " -ne "),
            (" -ne ", " -eq "),
            (" == ", " != "),
            (" != ", " == "),
        ],
        Lang::JavaScript => &[
            (" === ", " !== "),
            (" !== ", " === "),
            (" == ", " != "),
            (" != ", " == "),
        ],
        _ => &[(" == ", " != "), (" != ", " == ")],
    }
}

fn boundary_pairs(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Shell => &[
            (" -lt ", " -le "),
            (" -le ", " -lt "),
            (" -gt ", " -ge "),
            (" -ge ", " -gt "),
        ],
        _ => &[
            (" < ", " <= "),
            (" <= ", " < "),
            (" > ", " >= "),
            (" >= ", " > "),
        ],
    }
}

fn logical_pairs(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Python => &[(" and ", " or "), (" or ", " and ")],
        Lang::Ruby => &[
            (" && ", " || "),
            (" || ", " && "),
            (" and ", " or "),
            (" or ", " and "),
        ],
        _ => &[(" && ", " || "), (" || ", " && ")],
    }
}

fn boolean_pairs(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Python => &[("True", "False"), ("False", "True")],
        _ => &[("true", "false"), ("false", "true")],
    }
}

/// Python's `not` dropped where it negates a condition (`if not x`, `or not y`); `not in`
/// is left alone (` in ` is no comparison a mutator should flip in `for`).
fn drop_not(line: &str, code: &[bool]) -> Vec<String> {
    line.match_indices("not ")
        .filter(|(at, _)| is_code(code, *at, 4) && word_at(line, *at, 3))
        .filter(|(at, _)| !line[at + 4..].starts_with("in "))
        .filter(|(at, _)| !line[..*at].ends_with("is "))
        .map(|(at, _)| format!("{}{}", &line[..at], &line[at + 4..]))
        .collect()
}

/// The code position of the word `return`, if the line has one.
fn return_at(line: &str, code: &[bool]) -> Option<usize> {
    line.match_indices("return")
        .map(|(at, _)| at)
        .find(|at| is_code(code, *at, 6) && word_at(line, *at, 6))
}

/// Where the statement that starts at byte `from` ends: its `;`, or the `}` closing the
/// one-line block around it, found only in code (not in a string or comment) and outside the
/// value's own brackets; for Python, which has no terminator, the end of the line. `None`
/// when the value's brackets do not close on this line (it goes on below), so the line alone
/// cannot be mutated into something that builds.
fn statement_end(line: &str, from: usize, lang: Lang, code: &[bool]) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in line.bytes().enumerate().skip(from) {
        if !code.get(i).copied().unwrap_or(false) {
            continue;
        }
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.checked_sub(1)?,
            b'}' if depth == 0 => return (lang != Lang::Python).then_some(i),
            b'}' => depth -= 1,
            b';' if depth == 0 && lang != Lang::Python => return Some(i),
            _ => {}
        }
    }
    (depth == 0).then_some(line.len())
}

fn drop_return(line: &str, lang: Lang, code: &[bool]) -> Option<String> {
    let at = return_at(line, code)?;
    let before = &line[..at];
    match lang {
        // `return x` → `pass`; `if c: return x` → `if c: pass`.
        Lang::Python if before.trim().is_empty() || before.trim_end().ends_with(':') => {
            statement_end(line, at, lang, code)?;
            Some(format!("{before}pass"))
        }
        Lang::Python | Lang::Shell => None,
        // A bare `return x;` dropped is the same as the line deleted; only the early return
        // of a one-line `if` is its own mutant.
        _ if !before
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "if") =>
        {
            None
        }
        _ => {
            let end = statement_end(line, at, lang, code)?;
            let end = if line.as_bytes().get(end) == Some(&b';') {
                end + 1
            } else if end == line.len() {
                // No `;` and no closing `}`: the statement goes on below.
                return None;
            } else {
                end
            };
            let tail = line[end..].trim_start();
            // An `if` left without its statement would take the next line as its body.
            let body = if before.trim_end().ends_with('{') {
                ""
            } else {
                ";"
            };
            Some(format!("{before}{body}{tail}").trim_end().to_owned())
        }
    }
}

fn empty_return(line: &str, lang: Lang, code: &[bool]) -> Option<String> {
    let at = return_at(line, code)?;
    let head = &line[..at + "return".len()];
    let rest = &line[at + "return".len()..];
    let end = statement_end(line, at + "return".len(), lang, code)? - (at + "return".len());
    let value = rest[..end].trim();
    let tail = &rest[end..];
    if value.is_empty() || !rest.starts_with(' ') || !is_code(code, at, head.len() - at) {
        return None;
    }
    let empty = match lang {
        Lang::Python => "None".to_owned(),
        Lang::JavaScript => "undefined".to_owned(),
        Lang::Ruby => "nil".to_owned(),
        Lang::Rust => {
            if value.starts_with("Err(") || value == "None" {
                return None;
            } else if value.starts_with("Some(") {
                "None".to_owned()
            } else if value.starts_with("Ok(") && value.ends_with(')') {
                "Ok(Default::default())".to_owned()
            } else {
                "Default::default()".to_owned()
            }
        }
        Lang::Go | Lang::Shell | Lang::CLike => return None,
    };
    if value == empty {
        return None;
    }
    let sep = if tail.starts_with('}') { " " } else { "" };
    Some(format!("{head} {empty}{sep}{tail}"))
}

/// Whether deleting the line makes a mutant worth running: not blank, not a comment or a
/// docstring alone, not a line whose removal cannot build (a block opener, a lone bracket,
/// an import, a continued expression).
fn deletable(line: &str, lang: Lang, code: &[bool]) -> bool {
    let t = line.trim();
    if t.is_empty() || !code.iter().any(|c| *c) {
        return false;
    }
    // A line of only string literal(s): a docstring, or part of a multi-line string.
    if code
        .iter()
        .zip(line.bytes())
        .all(|(c, b)| !*c || b.is_ascii_whitespace() || b == b'"' || b == b'\'')
    {
        return false;
    }
    if t.chars()
        .all(|c| "{}()[];,".contains(c) || c.is_whitespace())
    {
        return false;
    }
    let first = t.split_whitespace().next().unwrap_or("");
    let openers = [
        "import", "from", "use", "mod", "package", "#include", "pub", "fn", "def", "class",
        "struct", "enum", "impl", "trait", "func", "function", "else", "elif", "except", "finally",
        "try", "}", ")", "]", "@",
    ];
    if openers
        .iter()
        .any(|o| first == *o || first.starts_with('@') || first.starts_with('#'))
    {
        return false;
    }
    if matches!(lang, Lang::Python) && first == "pass" {
        return false;
    }
    // A line that opens or closes more brackets than it closes or opens is part of a larger
    // construct: without it nothing builds. A balanced one (a statement, a match arm, a list
    // element ending in `,`) can go.
    let mut depth = 0i64;
    for (b, is_code) in line.bytes().zip(code) {
        match b {
            b'(' | b'[' | b'{' if *is_code => depth += 1,
            b')' | b']' | b'}' if *is_code => depth -= 1,
            _ => {}
        }
    }
    let last = t.chars().last().unwrap_or(' ');
    depth == 0 && !"\\:".contains(last) && !t.ends_with("=>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(line: &str, lang: Lang, mutator: Mutator) -> Vec<Option<String>> {
        mutate_line(line, lang)
            .into_iter()
            .filter(|m| m.mutator == mutator)
            .map(|m| m.line)
            .collect()
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn delete_line_removes_a_statement_and_python_keeps_the_block_with_pass() {
        assert_eq!(
            lines("    total += x;", Lang::Rust, Mutator::DeleteLine),
            [None]
        );
        assert_eq!(
            lines(
                "        raise ValueError(x)",
                Lang::Python,
                Mutator::DeleteLine
            ),
            [some("        pass")]
        );
    }

    #[test]
    fn delete_line_removes_a_match_arm_or_a_list_element_but_not_an_open_call() {
        assert_eq!(
            lines(
                "        3 => digits.chars().collect(),",
                Lang::Rust,
                Mutator::DeleteLine
            ),
            [None]
        );
        assert_eq!(
            lines("    (1000, \"M\"),", Lang::Python, Mutator::DeleteLine),
            [None]
        );
        assert!(lines("    call(a,", Lang::Rust, Mutator::DeleteLine).is_empty());
        assert!(lines("    \"(\" + x;", Lang::JavaScript, Mutator::DeleteLine).len() == 1);
    }

    #[test]
    fn delete_line_skips_lines_whose_removal_only_breaks_the_build_or_changes_nothing() {
        for (line, lang) in [
            ("", Lang::Rust),
            ("    }", Lang::Rust),
            ("    // a comment", Lang::Rust),
            ("    # a comment", Lang::Python),
            ("    \"\"\"A docstring.\"\"\"", Lang::Python),
            ("def f(x):", Lang::Python),
            ("    if x:", Lang::Python),
            ("import os", Lang::Python),
            ("use std::fs;", Lang::Rust),
            ("    let full = match n {", Lang::Rust),
            ("    pass", Lang::Python),
            ("    } else {", Lang::Rust),
        ] {
            assert!(
                lines(line, lang, Mutator::DeleteLine).is_empty(),
                "{line:?} should not be deleted"
            );
        }
    }

    #[test]
    fn negate_comparison_flips_each_equality_outside_strings() {
        assert_eq!(
            lines(
                "    if digits.len() != 6 && x == \"a == b\" {",
                Lang::Rust,
                Mutator::NegateComparison
            ),
            [
                some("    if digits.len() != 6 && x != \"a == b\" {"),
                some("    if digits.len() == 6 && x == \"a == b\" {"),
            ]
        );
        assert_eq!(
            lines(
                "    if x is not None:",
                Lang::Python,
                Mutator::NegateComparison
            ),
            [some("    if x is None:")]
        );
        assert_eq!(
            lines("    if x is None:", Lang::Python, Mutator::NegateComparison),
            [some("    if x is not None:")]
        );
        assert_eq!(
            lines(
                "  if a === b {",
                Lang::JavaScript,
                Mutator::NegateComparison
            ),
            [some("  if a !== b {")]
        );
        assert_eq!(
            lines("[ \"$n\" -eq 3 ]", Lang::Shell, Mutator::NegateComparison),
            [some("[ \"$n\" -ne 3 ]")]
        );
    }

    #[test]
    fn negate_comparison_drops_pythons_not_but_not_not_in() {
        assert_eq!(
            lines(
                "    if not isinstance(v, int) or k not in d:",
                Lang::Python,
                Mutator::NegateComparison
            ),
            [some("    if isinstance(v, int) or k not in d:")]
        );
    }

    #[test]
    fn boundary_swaps_strict_and_inclusive_comparisons_but_not_generics() {
        assert_eq!(
            lines(
                "    if not 1 <= value <= 3999:",
                Lang::Python,
                Mutator::Boundary
            ),
            [
                some("    if not 1 < value <= 3999:"),
                some("    if not 1 <= value < 3999:"),
            ]
        );
        assert_eq!(
            lines("    if n > 0 {", Lang::Rust, Mutator::Boundary),
            [some("    if n >= 0 {")]
        );
        assert_eq!(
            lines(
                "    let v: Vec<u8> = a.iter().map(|x| x->y).collect();",
                Lang::Rust,
                Mutator::Boundary
            ),
            Vec::<Option<String>>::new()
        );
        assert_eq!(
            lines("[ \"$n\" -lt 3 ]", Lang::Shell, Mutator::Boundary),
            [some("[ \"$n\" -le 3 ]")]
        );
    }

    #[test]
    fn swap_logical_swaps_and_or() {
        assert_eq!(
            lines("    if a and b or c:", Lang::Python, Mutator::SwapLogical),
            [some("    if a or b or c:"), some("    if a and b and c:")]
        );
        assert_eq!(
            lines("    ok = a || b;", Lang::JavaScript, Mutator::SwapLogical),
            [some("    ok = a && b;")]
        );
    }

    #[test]
    fn swap_boolean_swaps_whole_words_only() {
        assert_eq!(
            lines(
                "    strict = True  # True",
                Lang::Python,
                Mutator::SwapBoolean
            ),
            [some("    strict = False  # True")]
        );
        assert_eq!(
            lines("    let is_true = false;", Lang::Rust, Mutator::SwapBoolean),
            [some("    let is_true = true;")]
        );
    }

    #[test]
    fn empty_return_replaces_the_value_with_the_languages_empty_one() {
        assert_eq!(
            lines("    return total", Lang::Python, Mutator::EmptyReturn),
            [some("    return None")]
        );
        assert_eq!(
            lines("  return a + b;", Lang::JavaScript, Mutator::EmptyReturn),
            [some("  return undefined;")]
        );
        assert_eq!(
            lines("    return Ok(rgb);", Lang::Rust, Mutator::EmptyReturn),
            [some("    return Ok(Default::default());")]
        );
        assert_eq!(
            lines("    return Some(x);", Lang::Rust, Mutator::EmptyReturn),
            [some("    return None;")]
        );
        // No value, an error, or already empty: nothing to empty.
        for (line, lang) in [
            ("    return", Lang::Python),
            ("    return None", Lang::Python),
            ("    return Err(e);", Lang::Rust),
            ("    return x;", Lang::Go),
        ] {
            assert!(lines(line, lang, Mutator::EmptyReturn).is_empty(), "{line}");
        }
    }

    /// Found on the platform's funded bounties: the value was cut at the first `;` or `}` of
    /// the line, inside a string or a dict literal too, and a multi-line `return {` lost its
    /// block. Such mutants cannot run, count as "did not build", and so as killed: they
    /// inflated the score of the benchmark under test.
    #[test]
    fn a_returned_literal_or_string_holding_a_terminator_is_emptied_whole_or_not_at_all() {
        assert_eq!(
            lines(r#"    return {"a": 1}"#, Lang::Python, Mutator::EmptyReturn),
            [some("    return None")]
        );
        assert_eq!(
            lines(
                r#"  return "a;b}";"#,
                Lang::JavaScript,
                Mutator::EmptyReturn
            ),
            [some("  return undefined;")]
        );
        assert_eq!(
            lines(
                "  if (x) { return f(a, b); }",
                Lang::JavaScript,
                Mutator::EmptyReturn
            ),
            [some("  if (x) { return undefined; }")]
        );
        assert_eq!(
            lines(
                "  if (x) { return f(a, b) }",
                Lang::JavaScript,
                Mutator::EmptyReturn
            ),
            [some("  if (x) { return undefined }")]
        );
        // A value continued on the next lines: emptying or dropping this line alone cannot
        // build, so it is no mutant.
        for mutator in [Mutator::EmptyReturn, Mutator::DropReturn] {
            for (line, lang) in [
                ("    return {", Lang::Python),
                ("    return (a and", Lang::Python),
                ("  if (x) return f(a,", Lang::JavaScript),
                ("    return Ok(Rgb {", Lang::Rust),
            ] {
                assert!(lines(line, lang, mutator).is_empty(), "{mutator:?}: {line}");
            }
        }
    }

    #[test]
    fn drop_return_removes_an_early_return() {
        assert_eq!(
            lines("    if n == 0: return 1", Lang::Python, Mutator::DropReturn),
            [some("    if n == 0: pass")]
        );
        assert_eq!(
            lines("        return roman", Lang::Python, Mutator::DropReturn),
            [some("        pass")]
        );
        assert_eq!(
            lines(
                "    if n == 0 { return Err(E::Empty); }",
                Lang::Rust,
                Mutator::DropReturn
            ),
            [some("    if n == 0 { }")]
        );
        assert_eq!(
            lines(
                "  if (!x) return null;",
                Lang::JavaScript,
                Mutator::DropReturn
            ),
            [some("  if (!x) ;")]
        );
        // A bare `return x;` dropped is the deleted line, not a mutant of its own.
        assert!(lines("    return x;", Lang::Rust, Mutator::DropReturn).is_empty());
    }

    #[test]
    fn no_mutant_is_the_line_itself_or_a_duplicate() {
        for (line, lang) in [
            ("        return roman", Lang::Python),
            ("    if a == b and True:", Lang::Python),
            ("    x = \"a < b\"", Lang::Python),
        ] {
            let all = mutate_line(line, lang);
            for (i, m) in all.iter().enumerate() {
                assert_ne!(m.line.as_deref(), Some(line));
                assert!(all[..i].iter().all(|o| o.line != m.line), "{all:?}");
            }
        }
        assert_eq!(
            lines("        return roman", Lang::Python, Mutator::DeleteLine),
            Vec::<Option<String>>::new(),
            "`pass` is already the dropped return"
        );
    }

    #[test]
    fn languages_come_from_the_extension() {
        assert_eq!(lang_of("a/b.py"), Some(Lang::Python));
        assert_eq!(lang_of("src/lib.rs"), Some(Lang::Rust));
        assert_eq!(lang_of("x.tsx"), Some(Lang::JavaScript));
        assert_eq!(lang_of("README.md"), None);
        assert_eq!(lang_of("Makefile"), None);
    }
}
