//! The evidence record's host facts (issue #28 item 4: `worker doctor`'s facts copied into each
//! record's engine section): a real `--run-regression` on this host, its record against
//! `worker doctor --json` and against facts read without the worker (the docker CLI, `stat -f`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::example_run::ExampleRequest;
use crate::support;
use crate::support::stat_fs;

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

fn docker_info(format: &str) -> String {
    // Fails loudly (not skipped) when the daemon is not there.
    support::docker_cli(&["info", "--format", format])
        .trim()
        .to_string()
}

/// The evidence record of a `--run-regression` of the failing example under `oci_runtime`.
fn run_regression(dir: &Path, oci_runtime: &str) -> Value {
    let (outcome, evidence) =
        ExampleRequest::failing_run_evidence(dir, &["--oci-runtime", oci_runtime]);
    assert_eq!(outcome["verdict"], "failed", "{outcome:#}");
    serde_json::from_slice(&fs::read(&evidence).unwrap()).unwrap()
}

fn doctor(oci_runtime: &str) -> Value {
    let out = Command::new(WORKER)
        .args(["doctor", "--json", "--oci-runtime", oci_runtime])
        .env_remove("DOCKER_HOST")
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_run_regression_evidence_record_carries_the_host_facts_worker_doctor_reports() {
    let oci_runtime = support::oci_runtime();
    let dir = tempfile::tempdir().unwrap();
    let record = run_regression(dir.path(), &oci_runtime);
    let engine = &record["engine"];
    let host = engine
        .get("host")
        .unwrap_or_else(|| panic!("no host facts in the engine section: {engine:#}"));
    let report = doctor(&oci_runtime);

    // Every engine-and-host line of the doctor, with the same verdict; the staging and
    // sandbox uid lines are the doctor's alone (the executor is given no staging root to
    // examine, and each of its runs takes a uid lease of its own rather than a trial one).
    let mut worst = "ok";
    let rank = |s: &str| ["ok", "warn", "fail"].iter().position(|x| *x == s).unwrap();
    let mut names = Vec::new();
    for check in report["checks"].as_array().unwrap() {
        let name = check["name"].as_str().unwrap();
        if name == "staging" || name == "sandbox_uids" {
            continue;
        }
        names.push(name.to_string());
        let status = check["status"].as_str().unwrap();
        assert_eq!(
            host["checks"][name], status,
            "{name}: {check:#} vs {host:#}"
        );
        if rank(status) > rank(worst) {
            worst = status;
        }
    }
    let recorded: Vec<&String> = host["checks"].as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(recorded, names.iter().collect::<Vec<_>>(), "{host:#}");
    assert_eq!(host["doctor"], worst, "{host:#}");

    // The cgroups: the engine's version and driver as the docker CLI reports them, the same
    // the doctor prints, and the host's layout told apart without the doctor's parser.
    let version = docker_info("{{.CgroupVersion}}");
    let driver = docker_info("{{.CgroupDriver}}");
    assert_eq!(engine["cgroup_version"], version.as_str(), "{engine:#}");
    assert_eq!(engine["cgroup_driver"], driver.as_str(), "{engine:#}");
    let line = |name: &str| {
        support::doctor_check(&report, name)["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let cgroups = line("cgroups");
    assert!(
        cgroups.contains(&format!("cgroup v{version} with the {driver} driver")),
        "{cgroups}"
    );
    let layout = match (
        stat_fs("/sys/fs/cgroup").as_str(),
        stat_fs("/sys/fs/cgroup/unified").as_str(),
    ) {
        ("cgroup2fs", _) => "v2",
        ("tmpfs", "cgroup2fs") => "hybrid",
        ("tmpfs", _) => "v1",
        other => panic!("unexpected cgroup mount {other:?}"),
    };
    assert_eq!(host["cgroup_layout"], layout, "{host:#}");

    // The runtimes: every one the daemon registers, with its path and flags, as the docker CLI
    // lists them and the doctor prints them; runsc with --network=none when it is registered.
    let registered: Value = serde_json::from_str(&docker_info("{{json .Runtimes}}")).unwrap();
    let registered = registered.as_object().unwrap();
    let runtimes = host["runtimes"].as_object().unwrap();
    assert_eq!(
        runtimes.keys().collect::<Vec<_>>(),
        {
            let mut names: Vec<&String> = registered.keys().collect();
            names.sort();
            names
        },
        "{host:#}"
    );
    let listed = line("oci_runtime");
    for (name, entry) in registered {
        assert_eq!(runtimes[name]["path"], entry["path"], "{name}: {host:#}");
        let args = entry.get("runtimeArgs").cloned().unwrap_or(json!([]));
        assert_eq!(runtimes[name]["args"], args, "{name}: {host:#}");
        assert!(listed.contains(&format!("{name} (")), "{name}: {listed}");
    }
    if let Some(runsc) = runtimes.get("runsc") {
        let args = runsc["args"].as_array().unwrap();
        assert!(args.contains(&json!("--network=none")), "{runsc:#}");
        assert!(
            listed.contains(&format!("runsc ({}", runsc["path"].as_str().unwrap())),
            "{listed}"
        );
    }
    // The suite's runsc leg runs on a daemon that must offer it.
    if support::under_runsc() {
        assert!(runtimes.contains_key("runsc"), "{host:#}");
    }
    assert_eq!(
        host.get("default_runtime").and_then(Value::as_str),
        Some(docker_info("{{.DefaultRuntime}}").as_str()).filter(|r| !r.is_empty()),
        "{host:#}"
    );

    // Security options verbatim, and what the doctor reads from them.
    let options: Value = serde_json::from_str(&docker_info("{{json .SecurityOptions}}")).unwrap();
    let options = if options.is_null() {
        json!([])
    } else {
        options
    };
    assert_eq!(host["security_options"], options, "{host:#}");
    let has = |name: &str| {
        options.as_array().unwrap().iter().any(|o| {
            o.as_str()
                .unwrap()
                .split(',')
                .any(|p| p == format!("name={name}"))
        })
    };
    assert_eq!(host["seccomp"], has("seccomp"), "{host:#}");
    assert_eq!(host["apparmor"], has("apparmor"), "{host:#}");
    assert_eq!(host["userns_remap"], has("userns"), "{host:#}");

    // The run's own runtime facts are still where the signer reads them.
    assert_eq!(record["oci_runtime"]["name"], oci_runtime.as_str());
}
