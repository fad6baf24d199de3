//! Keep-text stubs (issue 42 item 1): a solver's file with its language's early exit put where
//! it runs first and every original byte kept below it, so a benchmark that greps the solver's
//! files for phrases still finds them, while the code never runs.
//!
//! The language comes from the file itself (its extension, else its `#!` line), never from the
//! manifest: one tree holds Python tests, a shell script and a Rust crate alike. Each body is
//! placed where its language still compiles with the original text after it:
//!
//! - Python: after the `#!` and coding lines and any `from __future__` import (which must come
//!   first, or the whole file is a syntax error before anything runs);
//! - shell, JavaScript/TypeScript, Ruby: after the `#!` line;
//! - Rust: a constructor (`.init_array`, run by the loader before `main` and so before any test)
//!   appended at the end, because inner attributes and `//!` docs must open a file; where it
//!   sits does not change when it runs;
//! - Go: an aliased `import "os"` after the package clause (imports precede declarations) and
//!   `func init()` appended (every `init` runs before `TestMain` and the tests);
//! - anything else the benchmark may run, or executable: `#!/bin/sh` and the exit, the original
//!   text (its own `#!` line included) below.

use std::path::Path;

/// A file's language, as far as its early exit is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// `.py`, `.pyw`, or a `#!` naming python.
    Python,
    /// `.sh`, `.bash`, or a `#!` naming sh, bash, dash, ksh or zsh.
    Shell,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`, `.ts`, `.mts`, `.cts`, `.tsx`, or a `#!` naming node.
    JavaScript,
    /// `.rb`, or a `#!` naming ruby.
    Ruby,
    /// `.rs`.
    Rust,
    /// `.go`.
    Go,
    /// No known language: run as a `#!/bin/sh` script when executed.
    Generic,
}

/// The exit status a keep-text body ends the process with: 0 makes a non-solution look like a
/// pass; 1 makes the solver's code fail as soon as it is loaded (the base the runner shadows are
/// added to, so that a pass can only come from the shadow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Status 0.
    Success,
    /// Status 1.
    Failure,
}

impl Exit {
    fn code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Failure => 1,
        }
    }
}

/// The language of `rel_path` from its extension, else from the `#!` line at the start of
/// `head`; `Generic` for an executable file or one the benchmark may run; `None` for anything
/// else (data, documents), which is kept unchanged.
pub fn language(rel_path: &str, head: &[u8], generic: bool) -> Option<Language> {
    let by_extension = Path::new(rel_path)
        .extension()
        .and_then(|e| e.to_str())
        .and_then(|ext| {
            Some(match ext {
                "py" | "pyw" => Language::Python,
                "sh" | "bash" => Language::Shell,
                "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => Language::JavaScript,
                "rb" => Language::Ruby,
                "rs" => Language::Rust,
                "go" => Language::Go,
                _ => return None,
            })
        });
    by_extension
        .or_else(|| by_shebang(head))
        .or(generic.then_some(Language::Generic))
}

/// The interpreter a `#!` line names (`/usr/bin/env python3 -u` → python).
fn by_shebang(head: &[u8]) -> Option<Language> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let mut program = words.next()?.rsplit('/').next()?;
    if program == "env" {
        program = words.find(|w| !w.starts_with('-'))?;
    }
    let program = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match program {
        "python" | "pypy" => Language::Python,
        "sh" | "bash" | "dash" | "ksh" | "zsh" | "ash" => Language::Shell,
        "node" | "nodejs" | "deno" | "bun" | "tsx" | "ts-node" => Language::JavaScript,
        "ruby" => Language::Ruby,
        _ => return None,
    })
}

/// Options a language needs beyond the file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// The file's crate is edition 2024, where `link_section` must be written `unsafe(…)`
    /// (which rustc before 1.82, such as Debian's 1.63, does not know).
    pub rust_2024: bool,
}

/// `original` with `language`'s early exit with `exit`'s status where it runs first, every
/// original byte kept; `None` when the file cannot take one (a Go file without a package clause).
pub fn keep_text(
    language: Language,
    original: &[u8],
    exit: Exit,
    context: Context,
) -> Option<Vec<u8>> {
    let code = exit.code();
    let (at, body): (usize, String) = match language {
        Language::Python => (
            python_insertion(original),
            format!("import os; os._exit({code})\n"),
        ),
        Language::Shell => (shebang_end(original), format!("exit {code}\n")),
        Language::JavaScript => (shebang_end(original), format!("process.exit({code});\n")),
        Language::Ruby => (shebang_end(original), format!("exit!({code})\n")),
        Language::Generic => (0, format!("#!/bin/sh\nexit {code}\n")),
        Language::Rust => {
            let mut out = original.to_vec();
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(rust_constructor(code, context.rust_2024).as_bytes());
            return Some(out);
        }
        Language::Go => {
            let at = go_package_end(original)?;
            let mut out = original[..at].to_vec();
            out.extend_from_slice(b"import rehearseexitos \"os\"\n");
            out.extend_from_slice(&original[at..]);
            if !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(
                format!("func init() {{ rehearseexitos.Exit({code}) }}\n").as_bytes(),
            );
            return Some(out);
        }
    };
    let mut out = original[..at].to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(&original[at..]);
    Some(out)
}

/// A function pointer in `.init_array`: the loader calls it when the binary (a test binary
/// linking the crate) starts, before `main`. `#[used]` keeps it, and rustc links every crate's
/// used statics, so it needs no extra crate (no `ctor`).
fn rust_constructor(code: u8, edition_2024: bool) -> String {
    let section = if edition_2024 {
        "#[unsafe(link_section = \".init_array\")]"
    } else {
        "#[link_section = \".init_array\"]"
    };
    format!(
        "#[allow(unsafe_code, non_upper_case_globals, dead_code)]\n\
         #[used]\n\
         {section}\n\
         static rehearse_exit_on_load: extern \"C\" fn() = {{\n    \
         extern \"C\" fn rehearse_exit_on_load() {{\n        \
         std::process::exit({code})\n    \
         }}\n    \
         rehearse_exit_on_load\n\
         }};\n"
    )
}

/// The byte after the `#!` line, or 0.
fn shebang_end(text: &[u8]) -> usize {
    if !text.starts_with(b"#!") {
        return 0;
    }
    text.iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| i + 1)
}

/// Where Python code may start: after a `#!` line, a coding line in the first two lines, and the
/// last `from __future__ import` statement (a parenthesised one followed to its `)`).
fn python_insertion(text: &[u8]) -> usize {
    let mut at = 0;
    let mut offset = 0;
    let mut in_future = false;
    for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let end = offset + line.len();
        let trimmed = String::from_utf8_lossy(line);
        let trimmed = trimmed.trim();
        if in_future {
            if trimmed.contains(')') {
                in_future = false;
                at = end;
            }
        } else if (i == 0 && trimmed.starts_with("#!"))
            || (i < 2 && trimmed.starts_with('#') && trimmed.contains("coding"))
        {
            at = end;
        } else if trimmed.starts_with("from __future__ import") {
            in_future = trimmed.contains('(') && !trimmed.contains(')');
            at = end;
        }
        offset = end;
    }
    at
}

/// The byte after a Go file's `package` clause line; `None` without one.
fn go_package_end(text: &[u8]) -> Option<usize> {
    let mut offset = 0;
    let mut in_block_comment = false;
    for line in text.split_inclusive(|&b| b == b'\n') {
        let end = offset + line.len();
        let s = String::from_utf8_lossy(line);
        let s = s.trim();
        if in_block_comment || s.starts_with("/*") {
            in_block_comment = !s.contains("*/");
        } else if s.starts_with("package ") {
            return Some(end);
        }
        offset = end;
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn kept(language: Language, original: &str, exit: Exit) -> String {
        String::from_utf8(
            keep_text(language, original.as_bytes(), exit, Context::default()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn the_language_comes_from_the_extension_then_the_shebang_then_the_exec_bit() {
        for (path, head, generic, want) in [
            ("a/b.py", "", false, Some(Language::Python)),
            (
                "run",
                "#!/usr/bin/env python3 -u\nprint(1)",
                false,
                Some(Language::Python),
            ),
            ("run", "#!/bin/bash\n", false, Some(Language::Shell)),
            (
                "cli",
                "#!/usr/bin/env node\n",
                false,
                Some(Language::JavaScript),
            ),
            ("x.tsx", "", false, Some(Language::JavaScript)),
            ("src/lib.rs", "", false, Some(Language::Rust)),
            ("main.go", "", false, Some(Language::Go)),
            ("t.rb", "", false, Some(Language::Ruby)),
            ("tool", "\x7fELF", true, Some(Language::Generic)),
            ("README.md", "# phrases", false, None),
            ("data.json", "{}", false, None),
        ] {
            assert_eq!(language(path, head.as_bytes(), generic), want, "{path}");
        }
    }

    #[test]
    fn every_language_puts_its_exit_first_and_keeps_every_original_byte() {
        let py = "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\"\"\"doc\"\"\"\nfrom __future__ import (\n    annotations,\n)\ndef f(): pass\n";
        let out = kept(Language::Python, py, Exit::Success);
        assert_eq!(
            out,
            "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\"\"\"doc\"\"\"\nfrom __future__ import (\n    annotations,\n)\nimport os; os._exit(0)\ndef f(): pass\n"
        );
        assert_eq!(
            kept(Language::Python, "def f(): pass\n", Exit::Failure),
            "import os; os._exit(1)\ndef f(): pass\n"
        );
        assert_eq!(
            kept(Language::Shell, "#!/bin/sh\necho real\n", Exit::Success),
            "#!/bin/sh\nexit 0\necho real\n"
        );
        assert_eq!(
            kept(
                Language::JavaScript,
                "export function f() {}\n",
                Exit::Success
            ),
            "process.exit(0);\nexport function f() {}\n"
        );
        assert_eq!(
            kept(Language::Ruby, "def f; end", Exit::Success),
            "exit!(0)\ndef f; end"
        );
        assert_eq!(
            kept(
                Language::Generic,
                "#!/usr/bin/perl\nprint 1;\n",
                Exit::Success
            ),
            "#!/bin/sh\nexit 0\n#!/usr/bin/perl\nprint 1;\n"
        );
        let rs = "//! docs\n#![warn(missing_docs)]\npub fn f() {}";
        let out = kept(Language::Rust, rs, Exit::Success);
        assert!(out.starts_with(&format!("{rs}\n#[allow(")), "{out}");
        assert!(out.contains("#[link_section = \".init_array\"]"), "{out}");
        assert!(out.contains("std::process::exit(0)"), "{out}");
        let edition_2024 = String::from_utf8(
            keep_text(
                Language::Rust,
                rs.as_bytes(),
                Exit::Success,
                Context { rust_2024: true },
            )
            .unwrap(),
        )
        .unwrap();
        assert!(
            edition_2024.contains("#[unsafe(link_section = \".init_array\")]"),
            "{edition_2024}"
        );
        let go = "// Package p.\n/* block\npackage fake */\npackage p\n\nimport \"fmt\"\n\nfunc F() { fmt.Println() }\n";
        let out = kept(Language::Go, go, Exit::Success);
        assert_eq!(
            out,
            "// Package p.\n/* block\npackage fake */\npackage p\nimport rehearseexitos \"os\"\n\nimport \"fmt\"\n\nfunc F() { fmt.Println() }\nfunc init() { rehearseexitos.Exit(0) }\n"
        );
        assert!(
            keep_text(
                Language::Go,
                b"// no package\n",
                Exit::Success,
                Context::default()
            )
            .is_none()
        );
    }
}
