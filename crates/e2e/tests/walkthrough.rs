//! The walk-throughs and guides of the documentation are run as written (issue #47: no page can
//! drift from the tools): manifests/README.md ("Walk-through: a real project"),
//! docs/authors.md ("Rehearse a bounty, end to end"), and the whole of docs/solvers.md,
//! docs/reproduce.md and docs/operators.md. The ```sh blocks, in order, run as one
//! `bash -xeuo pipefail` script with the built `worker` first on `PATH`, on the real Docker
//! Engine and the digest-pinned python image; a block that stops working as documented fails
//! its test. A guide's first ```sh block holds only the variables its reader sets (`API=https://…`):
//! it is not run, the test sets exactly those variables to the local services' real values (the
//! loopback platform and codeload stand-in, the Hardhat chain, local git repositories).
//! Commands that cannot run here (systemd, GitHub) are fenced ```text instead, and
//! `every_sh_block_of_the_guides_is_run_by_a_test` fails on a ```sh block no test runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use e2e::E2eConfig;
use e2e::guides::{feed_with_a_job, settled_bounty, solver_bounty};

const SECTION: &str =
    "## Walk-through: a real project (src layout, vendored dependency, test count)";
const AUTHORS_SECTION: &str = "## Rehearse a bounty, end to end";
/// Runs after [`AUTHORS_SECTION`], whose `/tmp/walk/manifest.json` it uses.
const MUTANTS_SECTION: &str = "## Make it strong: mutants";

/// Each guide, and the sections whose ```sh blocks a test here runs (`None`: every block of
/// the guide, its first being the variables block).
const GUIDES: [(&str, Option<&[&str]>); 4] = [
    ("docs/authors.md", Some(&[AUTHORS_SECTION, MUTANTS_SECTION])),
    ("docs/solvers.md", None),
    ("docs/reproduce.md", None),
    ("docs/operators.md", None),
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn config(name: &str) -> E2eConfig {
    let root = repo_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    E2eConfig::from_repo(&root, &target.join("debug"), &root.join(".work").join(name))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Every ```sh block of `markdown`, with the `## ` heading it is under ("" before the first).
fn all_sh_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut heading = String::new();
    let mut current: Option<String> = None;
    let mut in_other_fence = false;
    for line in markdown.lines() {
        let text = line.trim_end();
        match &mut current {
            None if in_other_fence => in_other_fence = !text.starts_with("```"),
            None if text == "```sh" => current = Some(String::new()),
            None if text.starts_with("```") => in_other_fence = true,
            None if text.starts_with("## ") => heading = text.to_owned(),
            None => {}
            Some(block) if text == "```" => {
                blocks.push((heading.clone(), std::mem::take(block)));
                current = None;
            }
            Some(block) => {
                block.push_str(text);
                block.push('\n');
            }
        }
    }
    assert!(
        current.is_none(),
        "an unclosed ```sh block under {heading:?}"
    );
    blocks
}

/// The ```sh blocks between `heading` and the next `## ` heading.
fn sh_blocks(markdown: &str, heading: &str) -> Vec<String> {
    assert!(
        markdown.lines().any(|l| l.trim_end() == heading),
        "the document has no heading {heading:?}"
    );
    all_sh_blocks(markdown)
        .into_iter()
        .filter(|(h, _)| h == heading)
        .map(|(_, b)| b)
        .collect()
}

/// The names a variables block sets; panics unless every line is a comment or `NAME=value`.
fn variables_of(block: &str) -> BTreeSet<String> {
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let name = l.split_once('=').map(|(n, _)| n).unwrap_or_default();
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "the variables block has a line that is not NAME=value: {l:?}"
            );
            name.to_owned()
        })
        .collect()
}

/// Every `.txt` and `.json` file under `dir`, with its name, for a failure message.
fn reports(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("store") {
                out.push_str(&reports(&path));
            }
        } else if path.extension().is_some_and(|e| e == "txt" || e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push_str(&format!("--- {}\n{text}\n", path.display()));
        }
    }
    out
}

/// Runs `script` from the repository root, as the walk-throughs' reader would.
fn run_as_written(root: &Path, script: &str) -> String {
    run_script(root, root, script, &[])
}

/// Runs `script` as the documentation's reader would: `bash -xeuo pipefail` from `cwd`, the
/// built `worker` first on `PATH`, a private `TMPDIR`, `vars` set. Returns stdout; panics with
/// the output and the reports the blocks wrote when the script fails. The script runs in a
/// process group of its own, killed when it ends, so a service it started in the background
/// (docs/operators.md) does not outlive a failure; its output goes to files, so waiting for
/// the script never waits for such a service to close a pipe.
fn run_script(root: &Path, cwd: &Path, script: &str, vars: &[(&str, String)]) -> String {
    use std::os::unix::process::CommandExt;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug");
    assert!(
        bin.join("worker").is_file(),
        "{} is missing; cargo build -p worker",
        bin.join("worker").display()
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tmp = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let mut child = Command::new("bash")
        .args(["-xeuo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("TMPDIR", tmp.path())
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .envs(vars.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    // The group's id is the script's pid; what is left of it is what the script started.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    if !status.success() {
        // The blocks send the rehearsals' reports to files in their $work: show them.
        panic!(
            "the walk-through failed ({status}):\n{stdout}\n{stderr}\n{}",
            reports(tmp.path())
        );
    }
    // On success too, so a passing run's log shows what each command printed.
    eprintln!("{stdout}\n{stderr}");
    stdout
}

/// Runs every ```sh block of the guide at `doc` but its first, the variables block, whose
/// names must be exactly those of `vars`, which are set instead.
fn run_guide(doc: &str, cwd: &Path, vars: &[(&str, String)]) -> String {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join(doc)).unwrap();
    let blocks = all_sh_blocks(&guide);
    let (_, first) = blocks
        .first()
        .unwrap_or_else(|| panic!("{doc} has no ```sh block"));
    let given: BTreeSet<String> = vars.iter().map(|(k, _)| (*k).to_owned()).collect();
    assert_eq!(
        variables_of(first),
        given,
        "{doc}'s variables block sets other variables than the test gives"
    );
    let script: String = blocks[1..].iter().map(|(_, b)| b.as_str()).collect();
    run_script(&root, cwd, &script, vars)
}

#[test]
fn the_manifests_readme_walkthrough_runs_as_written() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("manifests/README.md")).unwrap();
    let blocks = sh_blocks(&readme, SECTION);
    // The manifest, the test count, the full rehearsal, the committed digests.
    assert_eq!(blocks.len(), 4, "{blocks:#?}");
    let stdout = run_as_written(&root, &blocks.concat());
    // The last block prints the runner_manifest_hash the bounty commits.
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sha256:") && last.len() == 71,
        "last line is not a runner_manifest_hash: {last:?}\n{stdout}"
    );
}

#[test]
fn the_authors_guide_walkthrough_runs_as_written() {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join("docs/authors.md")).unwrap();
    let blocks = sh_blocks(&guide, AUTHORS_SECTION);
    // One block: the manifest, two rehearsals, a run read back, the committed digests.
    assert_eq!(blocks.len(), 1, "{blocks:#?}");
    // Then the mutation score of the same bounty, with the manifest step 1 wrote.
    let mutants = sh_blocks(&guide, MUTANTS_SECTION);
    // The block writes under /tmp/walk, as the guide shows; start from an empty one.
    let _ = std::fs::remove_dir_all("/tmp/walk");
    let stdout = run_as_written(&root, &[blocks, mutants].concat().concat());
    // Step 3, as the guide says it ends.
    assert!(
        stdout.contains("adversarial  held: no stub passed"),
        "step 3 did not hold against the stubs:\n{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l == "ok: passed, stable, discriminating"),
        "step 3 is not a usable bounty:\n{stdout}"
    );
    assert!(
        stdout.contains("mutants (") && !stdout.contains("WEAK"),
        "the mutants section did not score the bounty as the guide's table says:\n{stdout}"
    );
}

/// No ```sh block of a guide is left out: a guide listed with sections has blocks only in
/// those (each run by a test above), a guide run whole opens with its variables block, and no
/// shell block hides behind another shell fence (```bash, ```shell, …): what cannot run here
/// is fenced ```text or ```console.
#[test]
fn every_sh_block_of_the_guides_is_run_by_a_test() {
    let root = repo_root();
    for (doc, sections) in GUIDES {
        let guide = std::fs::read_to_string(root.join(doc)).unwrap();
        for line in guide.lines() {
            let info = line.trim().strip_prefix("```").unwrap_or("").trim();
            assert!(
                !["bash", "shell", "zsh", "sh-session"].contains(&info)
                    && (info == "sh" || !info.starts_with("sh ")),
                "{doc}: a shell block fenced {line:?}: use ```sh (run by a test) or ```text"
            );
        }
        let blocks = all_sh_blocks(&guide);
        match sections {
            Some(run) => {
                for (heading, block) in &blocks {
                    assert!(
                        run.contains(&heading.as_str()),
                        "{doc}: a ```sh block under {heading:?}, a section no test runs \
                         (add it to GUIDES and run it, or fence it ```text):\n{block}"
                    );
                }
            }
            None => {
                let (_, first) = blocks
                    .first()
                    .unwrap_or_else(|| panic!("{doc} has no ```sh block"));
                assert!(!variables_of(first).is_empty(), "{doc}: no variables block");
            }
        }
    }
}

/// docs/solvers.md from the terms to `worker reproduce --job-id`: the benchmark cloned from a
/// local bare repository (`GITHUB`), the solver's two commits rehearsed (`--base .@HEAD~1`),
/// the run explained, and the listed job of the solver's `HEAD` reproduced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_solvers_guide_runs_as_written() {
    let cfg = config("guide-solvers");
    let world = solver_bounty(&cfg, &cfg.work_dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The guide's one step that is not a command: the terms saved from the platform.
    let bounty = cfg.work_dir.join("bounty");
    std::fs::create_dir_all(&bounty).unwrap();
    std::fs::write(
        bounty.join("terms.json"),
        serde_json::to_vec_pretty(&world.terms).unwrap(),
    )
    .unwrap();
    // The guide writes its logs to /tmp/rehearse-logs, as it shows; start from none.
    let _ = std::fs::remove_dir_all("/tmp/rehearse-logs");
    let vars = [
        ("BOUNTY", bounty.display().to_string()),
        ("GITHUB", world.github.display().to_string()),
        ("ARCHIVES", world.feed.api().to_owned()),
        ("API", world.feed.api().to_owned()),
        ("VERIFIER", world.feed.verifier.to_string()),
        ("JOB_ID", world.feed.job_id.clone()),
    ];
    let cwd = world.solver_repo.clone();
    let stdout = tokio::task::spawn_blocking(move || run_guide("docs/solvers.md", &cwd, &vars))
        .await
        .unwrap();
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ok: passed, discriminating")),
        "step 2 did not end as the guide says:\n{stdout}"
    );
    assert!(
        stdout.contains("FAIL_TO_PASS (1)"),
        "step 2 named no FAIL_TO_PASS:\n{stdout}"
    );
    // The guide keeps the bounty's files out of the solver's tree: nothing to warn about.
    assert!(
        !stdout.contains("working tree differs"),
        "the guide's files made the solver's working tree differ:\n{stdout}"
    );
    assert!(
        stdout.contains("reproduction verdict `passed`"),
        "step 4 did not reproduce the job's verdict:\n{stdout}"
    );
    drop(world);
}

/// docs/reproduce.md's three reproductions of a bounty settled on the local chain over a
/// runner's real run: by its transaction, by the runner's candidate, by its job id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reproduce_guide_runs_as_written() {
    let cfg = config("guide-reproduce");
    let settled = settled_bounty(&cfg, &cfg.work_dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let vars = [
        ("RPC", settled.rpc.clone()),
        ("API", settled.api().to_owned()),
        ("ARCHIVES", settled.api().to_owned()),
        ("TX", settled.tx.to_string()),
        ("CANDIDATE", settled.candidate.display().to_string()),
        ("JOB_ID", settled.job_id.clone()),
        ("VERIFIER", settled.verifier.to_string()),
    ];
    let cwd = cfg.work_dir.join("reader");
    std::fs::create_dir_all(&cwd).unwrap();
    let stdout = tokio::task::spawn_blocking(move || run_guide("docs/reproduce.md", &cwd, &vars))
        .await
        .unwrap();
    assert_eq!(
        stdout.matches("reproduced bit for bit").count(),
        2,
        "the settlement and the candidate were not both reproduced bit for bit:\n{stdout}"
    );
    drop(settled);
}

/// docs/operators.md's "Try the service on one machine": the doctor, `worker serve` on a feed
/// listing one job until its verdict, `/healthz`, the ledger, a SIGTERM stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_guide_runs_as_written() {
    let cfg = config("guide-operators");
    let feed = feed_with_a_job(&cfg)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&cfg.work_dir);
    std::fs::create_dir_all(&cfg.work_dir).unwrap();
    // A port the kernel just gave out, so the guide's service never meets another's.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let vars = [
        ("API", feed.api().to_owned()),
        ("VERIFIER", feed.verifier.to_string()),
        ("ARCHIVES", feed.api().to_owned()),
        ("METRICS", format!("127.0.0.1:{port}")),
        ("WORK", cfg.work_dir.join("try").display().to_string()),
    ];
    let root = repo_root();
    let stdout = tokio::task::spawn_blocking(move || run_guide("docs/operators.md", &root, &vars))
        .await
        .unwrap();
    assert!(
        stdout.contains(r#""status":"ok""#),
        "/healthz did not answer ok:\n{stdout}"
    );
    assert!(
        stdout.contains(&feed.job_id),
        "the ledger does not list the job {}:\n{stdout}",
        feed.job_id
    );
    drop(feed);
}
