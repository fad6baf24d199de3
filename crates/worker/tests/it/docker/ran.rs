//! A finished `worker` process as the Docker tests read it, and the repo's fixtures and the
//! manifests and trees built from them: one definition for the rehearse, authoring and
//! per-test modules.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{image, workspace_root};

/// Exit code and both streams of a finished process.
pub(super) struct Ran {
    pub(super) code: i32,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Ran {
    /// Stdout as JSON, or a panic that shows both streams.
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not json ({e}): {}{}", self.stdout, self.stderr))
    }
}

/// Reads `output`; exit 5 (the engine unreachable) fails the test rather than passing for it,
/// since these tests must not silently skip without Docker.
pub(super) fn ran(output: &Output) -> Ran {
    let ran = Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert_ne!(
        ran.code, 5,
        "these tests need the Docker daemon on /var/run/docker.sock: {}",
        ran.stderr
    );
    ran
}

/// `fixtures/<path>` of this repository.
pub(super) fn fixture(path: &str) -> PathBuf {
    workspace_root().join("fixtures").join(path)
}

/// `worker rehearse --source … --benchmark … --manifest … --staging-root STORE EXTRA…`, with no
/// staging-root variable from the test's environment.
pub(super) fn rehearse_command(
    store: &Path,
    source: &Path,
    benchmark: &Path,
    manifest: &Path,
    extra: &[&str],
) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_worker"));
    command
        .arg("rehearse")
        .arg("--source")
        .arg(source)
        .arg("--benchmark")
        .arg(benchmark)
        .arg("--manifest")
        .arg(manifest)
        .arg("--staging-root")
        .arg(store)
        .args(extra)
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT");
    command
}

/// `manifests/<name>` with the locally built image (`key` in `.work/images.json`) pinned, then
/// `edit` applied, written to a new file in `dir`.
pub(super) fn manifest(
    dir: &Path,
    name: &str,
    key: &str,
    edit: impl FnOnce(&mut Value),
) -> PathBuf {
    let text = fs::read_to_string(workspace_root().join("manifests").join(name)).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["image"] = Value::String(image(key));
    edit(&mut value);
    let path = dir.join(format!("{key}-{}.json", fs::read_dir(dir).unwrap().count()));
    fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
    path
}

/// The solver's checker of the checker-running bounties (issue 26): `tools/check_card.py`
/// passes when `card.json` names the agent; both are written into `tree`.
pub(super) fn write_card_checker(tree: &Path) {
    fs::create_dir_all(tree.join("tools")).unwrap();
    fs::write(tree.join("card.json"), "{\"name\": \"agent\"}\n").unwrap();
    fs::write(
        tree.join("tools/check_card.py"),
        "import json, sys\n\
         card = json.load(open('/workspace/card.json'))\n\
         sys.exit(0 if card.get('name') == 'agent' else 1)\n",
    )
    .unwrap();
}
