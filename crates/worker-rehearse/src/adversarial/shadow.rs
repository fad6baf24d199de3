//! Runner shadows (issue 42 item 2): files that a test runner loads before any test, added to
//! the solver's real tree (its code made to fail on load with its text kept, so that phrase
//! checks still match and a pass can only come from the shadow). Each is named in the report
//! with what it shadows.
//!
//! A shadow ends the run with status 0 before the tests: a module named like the runner, a
//! start-up hook, a pytest `conftest.py` hook, the runners npm puts first on `PATH`, `npm test`'s
//! own script, or a Cargo manifest whose test targets are a `main` that exits 0. Python's
//! shadows are always tried (as before: a Python runner can be started by any benchmark); the
//! others only when the source holds that ecosystem's files.

use serde_json::Value;

/// One file a shadow writes, replacing a file of the same path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowFile {
    /// Path in the tree.
    pub rel_path: String,
    /// Its bytes.
    pub body: Vec<u8>,
    /// Whether it is executable.
    pub executable: bool,
}

/// One runner shadow: its stub name, what it shadows, and the files it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// `shadow <what>`.
    pub name: String,
    /// What it stands in for, in words an author knows.
    pub shadows: &'static str,
    /// The files written.
    pub files: Vec<ShadowFile>,
}

const PYTHON_EXIT_0: &str = "import os\nos._exit(0)\n";
/// Where a stub `main` for Cargo's test targets is written, beside each `Cargo.toml`.
pub const CARGO_SHADOW_MAIN: &str = "rehearse_shadow_main.rs";
/// The `bin` names npm puts first on `PATH` for `npm test` and friends.
const NODE_RUNNERS: [&str; 8] = ["jest", "mocha", "vitest", "ava", "tap", "tape", "c8", "nyc"];

fn file(rel_path: impl Into<String>, body: impl Into<Vec<u8>>, executable: bool) -> ShadowFile {
    ShadowFile {
        rel_path: rel_path.into(),
        body: body.into(),
        executable,
    }
}

fn one(name: &str, shadows: &'static str, files: Vec<ShadowFile>) -> Shadow {
    Shadow {
        name: format!("shadow {name}"),
        shadows,
        files,
    }
}

/// Python's shadows, tried on every tree.
pub fn python() -> Vec<Shadow> {
    vec![
        one(
            "unittest.py",
            "Python's unittest (python -m unittest with /workspace first on the import path)",
            vec![file("unittest.py", PYTHON_EXIT_0, false)],
        ),
        one(
            "pytest.py",
            "the pytest runner (python -m pytest with /workspace first on the import path)",
            vec![file("pytest.py", PYTHON_EXIT_0, false)],
        ),
        one(
            "conftest.py",
            "pytest's conftest.py hooks (a pytest_configure hook ends the run with status 0 \
             before any test is collected)",
            vec![file(
                "conftest.py",
                "import os\n\n\ndef pytest_configure(config):\n    os._exit(0)\n",
                false,
            )],
        ),
        one(
            "sitecustomize.py",
            "Python's start-up hook sitecustomize (imported by every interpreter that has \
             /workspace on PYTHONPATH)",
            vec![file("sitecustomize.py", PYTHON_EXIT_0, false)],
        ),
        one(
            "usercustomize.py",
            "Python's start-up hook usercustomize (imported by every interpreter that has \
             /workspace on PYTHONPATH)",
            vec![file("usercustomize.py", PYTHON_EXIT_0, false)],
        ),
        one(
            "rehearse-shadow.pth",
            "a .pth file (its import line runs at start-up when /workspace is a site directory)",
            vec![file(
                "rehearse-shadow.pth",
                "import os; os._exit(0)\n",
                false,
            )],
        ),
    ]
}

/// Node's shadows: the runners npm puts first on `PATH`, and `npm test`'s script in the
/// solver's `package.json` (`package_json`, when the tree has one at its root: every other key
/// kept).
pub fn node(package_json: Option<&[u8]>) -> Vec<Shadow> {
    let bins = NODE_RUNNERS
        .iter()
        .map(|name| {
            file(
                format!("node_modules/.bin/{name}"),
                "#!/bin/sh\nexit 0\n",
                true,
            )
        })
        .collect();
    let mut package: Value = package_json
        .and_then(|bytes| serde_json::from_slice(bytes).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(map) = package.as_object_mut() {
        let scripts = map
            .entry("scripts")
            .or_insert_with(|| serde_json::json!({}));
        if !scripts.is_object() {
            *scripts = serde_json::json!({});
        }
        if let Some(scripts) = scripts.as_object_mut() {
            scripts.insert("test".into(), Value::from("exit 0"));
        }
    }
    let mut body = serde_json::to_vec_pretty(&package).unwrap_or_default();
    body.push(b'\n');
    vec![
        one(
            "node_modules/.bin",
            "the test runners npm puts first on PATH (node_modules/.bin: jest, mocha, vitest, \
             ava, tap, tape, c8, nyc)",
            bins,
        ),
        one(
            "package.json scripts.test",
            "npm test (the solver's package.json scripts.test)",
            vec![file("package.json", body, false)],
        ),
    ]
}

/// Cargo's shadow: each `Cargo.toml` of `manifests` (path, text, whether `src/lib.rs` is beside
/// it) with every `[[test]]` target a `main` that exits 0 (`harness = false`), no test target
/// discovered under `tests/`, and the library's own tests and doctests off; `None` without one.
pub fn cargo(manifests: &[(String, String, bool)]) -> Option<Shadow> {
    if manifests.is_empty() {
        return None;
    }
    let mut files = Vec::new();
    for (rel_path, text, has_lib) in manifests {
        let dir = rel_path
            .rsplit_once('/')
            .map_or(String::new(), |(d, _)| format!("{d}/"));
        files.push(file(
            rel_path.clone(),
            cargo_manifest(text, *has_lib),
            false,
        ));
        files.push(file(
            format!("{dir}{CARGO_SHADOW_MAIN}"),
            "fn main() {}\n",
            false,
        ));
    }
    Some(one(
        "Cargo.toml harness = false",
        "the test targets cargo test builds (the solver's Cargo.toml: every [[test]] a main \
         that exits 0, harness = false)",
        files,
    ))
}

/// The edit of one `Cargo.toml`, line by line (no TOML library: the keys touched are plain
/// `key = value` lines of three tables).
fn cargo_manifest(text: &str, has_lib: bool) -> String {
    let mut out = String::new();
    let mut table = String::new();
    let mut saw_test = false;
    let mut saw_lib = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            table = trimmed.to_owned();
            out.push_str(line);
            out.push('\n');
            match trimmed {
                "[[test]]" => {
                    saw_test = true;
                    out.push_str(&format!(
                        "path = \"{CARGO_SHADOW_MAIN}\"\nharness = false\n"
                    ));
                }
                "[package]" => out.push_str("autotests = false\n"),
                "[lib]" => {
                    saw_lib = true;
                    out.push_str("test = false\ndoctest = false\n");
                }
                _ => {}
            }
            continue;
        }
        let key = trimmed.split('=').next().unwrap_or("").trim();
        let replaced = match table.as_str() {
            "[[test]]" => matches!(key, "path" | "harness"),
            "[package]" => key == "autotests",
            "[lib]" => matches!(key, "test" | "doctest"),
            _ => false,
        };
        if !replaced {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !saw_test {
        out.push_str(&format!(
            "\n[[test]]\nname = \"rehearse_shadow\"\npath = \"{CARGO_SHADOW_MAIN}\"\nharness = false\n"
        ));
    }
    if has_lib && !saw_lib {
        out.push_str("\n[lib]\ntest = false\ndoctest = false\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cargo_test_targets_become_a_main_that_exits_0_and_the_librarys_tests_are_off() {
        let toml = "[package]\nname = \"x\"\nautotests = true\n\n[[test]]\nname = \"benchmark\"\npath = \"/benchmark/t.rs\"\n\n[dependencies]\npath = \"kept\"\n";
        let shadow = cargo(&[("Cargo.toml".into(), toml.into(), true)]).unwrap();
        let text = String::from_utf8(shadow.files[0].body.clone()).unwrap();
        assert_eq!(
            text,
            "[package]\nautotests = false\nname = \"x\"\n\n[[test]]\npath = \"rehearse_shadow_main.rs\"\nharness = false\nname = \"benchmark\"\n\n[dependencies]\npath = \"kept\"\n\n[lib]\ntest = false\ndoctest = false\n"
        );
        assert_eq!(shadow.files[1].rel_path, "rehearse_shadow_main.rs");
        let nested = cargo(&[("crates/a/Cargo.toml".into(), "[package]\n".into(), false)]).unwrap();
        let text = String::from_utf8(nested.files[0].body.clone()).unwrap();
        assert!(text.ends_with("[[test]]\nname = \"rehearse_shadow\"\npath = \"rehearse_shadow_main.rs\"\nharness = false\n"), "{text}");
        assert!(!text.contains("[lib]"), "{text}");
        assert_eq!(nested.files[1].rel_path, "crates/a/rehearse_shadow_main.rs");
        assert!(cargo(&[]).is_none());
    }

    #[test]
    fn npm_test_becomes_exit_0_keeping_the_rest_of_package_json_and_runners_are_shadowed() {
        let shadows = node(Some(
            br#"{"type": "module", "scripts": {"test": "mocha", "x": "y"}}"#,
        ));
        let bins = &shadows[0];
        assert_eq!(bins.name, "shadow node_modules/.bin");
        assert!(
            bins.files
                .iter()
                .all(|f| f.executable && f.body == b"#!/bin/sh\nexit 0\n")
        );
        assert!(
            bins.files
                .iter()
                .any(|f| f.rel_path == "node_modules/.bin/mocha")
        );
        let package: Value = serde_json::from_slice(&shadows[1].files[0].body).unwrap();
        assert_eq!(
            package,
            serde_json::json!({"type": "module", "scripts": {"test": "exit 0", "x": "y"}})
        );
        let fresh: Value =
            serde_json::from_slice(&node(Some(b"not json"))[1].files[0].body).unwrap();
        assert_eq!(fresh, serde_json::json!({"scripts": {"test": "exit 0"}}));
    }

    #[test]
    fn python_shadows_name_what_they_shadow() {
        let names: Vec<String> = python().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "shadow unittest.py",
                "shadow pytest.py",
                "shadow conftest.py",
                "shadow sitecustomize.py",
                "shadow usercustomize.py",
                "shadow rehearse-shadow.pth"
            ]
        );
    }
}
