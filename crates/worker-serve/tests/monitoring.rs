//! The monitoring the project ships (issue #46): the alert rules under `deploy/prometheus/`
//! and the Grafana dashboard under `deploy/grafana/`, checked like code with the Prometheus
//! project's own `promtool` (Debian's `prometheus` package, which `scripts/services.sh`
//! installs): the rules load, their unit tests pass (a firing and a quiet case per rule),
//! every runbook link names a section of docs/operations.md, every dashboard query parses,
//! and every metric a rule or a query names is one the worker exposes (read from the real
//! registry in `telemetry`), one the built `signer` and `keeper` binaries write to their
//! `--metrics-file` (each run here once: a refused `signer sign`, a `keeper resume` against the
//! local Hardhat node), or one `deploy/prometheus/metric-names.txt` lists with its producer
//! (Prometheus's own). A missing `promtool`, binary or chain fails these tests; never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use worker_serve::clock::SystemClock;
use worker_serve::telemetry::Telemetry;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const RULES: &str = "deploy/prometheus/verifier.rules.yml";
const RULE_TESTS: &str = "deploy/prometheus/tests/verifier.test.yml";
const DASHBOARD: &str = "deploy/grafana/verifier.json";
const NAMES: &str = "deploy/prometheus/metric-names.txt";

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `promtool` on PATH, or a failed test naming the package.
fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not be started ({e}): install Debian's `prometheus` package \
                 (scripts/services.sh, which scripts/test.sh runs, installs it)"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {args:?}: {}\n{text}",
        out.status
    );
    text
}

/// One alert of the rules file, read line by line (the file's own layout: `- alert:`, then
/// `expr:` inline or as a `>-` block, then its annotations).
#[derive(Debug, Default)]
struct Alert {
    name: String,
    expr: String,
    annotations: BTreeMap<String, String>,
}

fn alerts() -> Vec<Alert> {
    let text = read(RULES);
    let mut alerts: Vec<Alert> = Vec::new();
    let mut in_expr_block = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- alert: ") {
            alerts.push(Alert {
                name: name.to_owned(),
                ..Alert::default()
            });
            in_expr_block = false;
            continue;
        }
        let Some(alert) = alerts.last_mut() else {
            continue;
        };
        if in_expr_block {
            if line.starts_with("          ") && !trimmed.is_empty() {
                alert.expr.push(' ');
                alert.expr.push_str(trimmed);
                continue;
            }
            in_expr_block = false;
        }
        if let Some(expr) = trimmed.strip_prefix("expr: ") {
            if expr == ">-" {
                in_expr_block = true;
            } else {
                alert.expr = expr.to_owned();
            }
            continue;
        }
        for key in ["summary", "description", "runbook_url"] {
            if let Some(value) = trimmed.strip_prefix(&format!("{key}: ")) {
                alert
                    .annotations
                    .insert(key.to_owned(), value.trim_matches('"').to_owned());
            }
        }
    }
    assert!(alerts.len() >= 13, "{alerts:?}");
    alerts
}

/// GitHub's heading anchors (what check-docs.py checks for Markdown links).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            let title = line.trim_start_matches('#').trim().to_lowercase();
            let slug: String = title
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            found.insert(slug);
        }
    }
    found
}

#[test]
fn alert_rules_load_and_pass_their_promtool_unit_tests() {
    let checked = promtool(&["check", "rules", RULES]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", RULE_TESTS]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// Each rule has a summary, a description saying what to do and a runbook section that
/// exists; and the unit tests have, for each rule, a case where it fires and one where it
/// must stay quiet (`exp_alerts: []`).
#[test]
fn every_alert_rule_has_a_runbook_section_and_a_firing_and_a_quiet_case() {
    let sections = anchors(&read("docs/operations.md"));
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let tests = read(RULE_TESTS);
    let mut lines = tests.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(name) = line.trim().strip_prefix("alertname: ") {
            let next = lines.peek().map(|l| l.trim()).unwrap_or_default();
            let entry = cases.entry(name.to_owned()).or_default();
            match next {
                "exp_alerts: []" => entry.1 += 1,
                "exp_alerts:" => entry.0 += 1,
                other => panic!("alertname {name} followed by {other:?}"),
            }
        }
    }
    for alert in alerts() {
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                alert.annotations.get(key).is_some_and(|v| !v.is_empty()),
                "{} has no {key}",
                alert.name
            );
        }
        let url = &alert.annotations["runbook_url"];
        let anchor = url.strip_prefix("docs/operations.md#").unwrap_or_else(|| {
            panic!("{}: runbook {url} is not in docs/operations.md", alert.name)
        });
        assert!(
            sections.contains(anchor),
            "{}: docs/operations.md has no section #{anchor}",
            alert.name
        );
        let (firing, quiet) = cases.get(&alert.name).copied().unwrap_or_default();
        assert!(
            firing >= 1 && quiet >= 1,
            "{}: {firing} firing and {quiet} quiet case(s) in {RULE_TESTS}",
            alert.name
        );
    }
}

/// The metric names a PromQL expression reads: identifiers that are neither functions,
/// keywords, label names (inside `{}` or a `by (...)` list), strings, durations nor numbers.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 11] = [
        "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan",
    ];
    const LABEL_LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let skip_to = |from: usize, close: char| -> usize {
        let mut j = from;
        while j < chars.len() && chars[j] != close {
            j += 1;
        }
        j + 1
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_to(i + 1, c);
        } else if c == '{' {
            i = skip_to(i + 1, '}');
        } else if c == '[' {
            i = skip_to(i + 1, ']');
        } else if c.is_ascii_digit() || c == '$' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "._$".contains(chars[i]))
            {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            // An aggregation may put its `by (...)` before its argument: `sum by (x) (...)`.
            let rest: String = chars[j..].iter().take(8).collect();
            let grouped = ["by", "without"].iter().any(|kw| {
                rest.strip_prefix(kw)
                    .is_some_and(|r| r.starts_with(|c: char| c == '(' || c.is_whitespace()))
            });
            let called = chars.get(j) == Some(&'(') || grouped;
            if called && LABEL_LISTS.contains(&word.as_str()) {
                i = skip_to(j + 1, ')');
            } else if !called && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn promql_metric_names_skip_functions_labels_and_keywords() {
    let got = metric_names(
        r#"sum by (job, instance) (increase(a_total{outcome=~"x|y"}[1h])) + max without (b) (rate(d_total[5m])) / on(instance) b_bytes > 1e9 and time() - c_seconds offset 5m > bool 0 or vector(1)"#,
    );
    let want: BTreeSet<String> = ["a_total", "b_bytes", "c_seconds", "d_total"]
        .map(String::from)
        .into();
    assert_eq!(got, want);
}

/// Every name the worker's `/metrics` can show, read from the registry `worker serve` uses:
/// the sample names of each `# TYPE` family (a counter's `_total`, a histogram's `_bucket`,
/// `_sum`, `_count`, an info's `_info`).
fn worker_exposition() -> BTreeSet<String> {
    let telemetry = Telemetry::new(Duration::from_secs(10), Arc::new(SystemClock::new()));
    // Families keyed by reason show only once a run gave them one.
    telemetry.run_started();
    telemetry.run_ended("no_verdict", Some("timeout"), Duration::from_secs(1));
    telemetry.run_started();
    telemetry.run_ended("error", Some("download_transport"), Duration::from_secs(1));
    telemetry.host_failure("engine_unavailable", "the engine did not answer");
    let text = telemetry.render();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        for suffix in suffixes {
            names.insert(format!("{name}{suffix}"));
        }
    }
    assert!(names.contains("worker_serve_runs_total"), "{text}");
    names
}

/// The directory of the built binaries (as the e2e tests find them).
fn bin_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("debug")
}

fn run_for_metrics(bin: &str, args: &[&std::ffi::OsStr], env: (&str, &str), want: i32) {
    let path = bin_dir().join(bin);
    let out = Command::new(&path)
        .args(args)
        .env(env.0, env.1)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} could not be started ({e}): build it with `cargo build -p signer -p keeper`",
                path.display()
            )
        });
    assert_eq!(out.status.code(), Some(want), "{bin}: {out:?}");
}

/// The sample names of a Prometheus text exposition (what a query selects), after
/// `promtool check metrics` has accepted it.
fn sample_names(text: &str) -> BTreeSet<String> {
    test_promtool::check_metrics("the exposition", text);
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Every sample name the signer's and the keeper's `--metrics-file` hold, from the real
/// binaries: a `signer sign` refused for its configuration (a failed run writes the file
/// too), and a `keeper resume` with nothing to resume against the local Hardhat node (so the
/// balance is there; `$CHAIN_RPC_URL`, default http://127.0.0.1:8545).
fn textfile_exposition() -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).into_os_string();
    let (signer_prom, keeper_prom, state) = (p("signer.prom"), p("keeper.prom"), p("state"));
    std::fs::create_dir(&state).unwrap();
    let arg = std::ffi::OsStr::new;
    run_for_metrics(
        "signer",
        &[
            arg("sign"),
            arg("--candidates"),
            dir.path().as_os_str(),
            arg("--out"),
            &p("out"),
            arg("--history"),
            &p("history"),
            arg("--api"),
            arg("http://127.0.0.1:9"),
            arg("--rpc"),
            arg("http://127.0.0.1:9"),
            arg("--signer"),
            arg("not-an-address"),
            arg("--key-env"),
            arg("H46_MONITORING_NO_KEY"),
            arg("--metrics-file"),
            &signer_prom,
        ],
        ("H46_MONITORING_NO_KEY", ""),
        78,
    );
    let rpc = std::env::var("CHAIN_RPC_URL").unwrap_or_else(|_| "http://127.0.0.1:8545".into());
    run_for_metrics(
        "keeper",
        &[
            arg("resume"),
            arg("--state-dir"),
            &state,
            arg("--rpc"),
            arg(&rpc),
            arg("--key-env"),
            arg("H46_MONITORING_KEEPER_KEY"),
            arg("--max-gas"),
            arg("1000000"),
            arg("--max-fee-per-gas"),
            arg("1000000000"),
            arg("--metrics-file"),
            &keeper_prom,
        ],
        // Hardhat's well-known development key 0 (public test key, no value anywhere); a
        // resume with no record sends nothing.
        (
            "H46_MONITORING_KEEPER_KEY",
            "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        ),
        0,
    );
    let mut names = BTreeSet::new();
    for file in [signer_prom, keeper_prom] {
        names.extend(sample_names(&std::fs::read_to_string(file).unwrap()));
    }
    for name in ["signer_signatures_total", "keeper_balance_wei"] {
        assert!(names.contains(name), "{names:?}");
    }
    names
}

/// Every name the rules and the dashboard may read from a verifier node.
fn exposed() -> BTreeSet<String> {
    let mut names = worker_exposition();
    names.extend(textfile_exposition());
    names
}

/// `deploy/prometheus/metric-names.txt`: name → producer, for what no binary of ours shows
/// (Prometheus's `up`).
fn agreed_names() -> BTreeMap<String, String> {
    read(NAMES)
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.split_whitespace();
            let name = parts.next().unwrap_or_default().to_owned();
            let producer = parts.collect::<Vec<_>>().join(" ");
            assert!(!producer.is_empty(), "{NAMES}: {name} has no producer");
            (name, producer)
        })
        .collect()
}

/// The dashboard's queries: `expr` of every target of every panel, nested rows included.
fn dashboard_queries() -> Vec<(String, String)> {
    fn walk(value: &serde_json::Value, title: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                let title = map
                    .get("title")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or(title);
                if let Some(expr) = map.get("expr").and_then(serde_json::Value::as_str) {
                    out.push((title.to_owned(), expr.to_owned()));
                }
                for v in map.values() {
                    walk(v, title, out);
                }
            }
            serde_json::Value::Array(items) => {
                for v in items {
                    walk(v, title, out);
                }
            }
            _ => {}
        }
    }
    let dashboard: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let mut out = Vec::new();
    walk(&dashboard["panels"], "", &mut out);
    out
}

/// Grafana's interval variables, which PromQL does not know, as the durations they stand for.
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

/// Each query parses (promtool loads it as a recording rule) and names only known metrics.
#[test]
fn every_dashboard_query_parses_and_names_only_exposed_metrics() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in queries.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(&as_promql(expr)).unwrap()
        ));
    }
    let file = dir.path().join("dashboard.rules.yml");
    std::fs::write(&file, rules).unwrap();
    let checked = promtool(&["check", "rules", file.to_str().unwrap()]);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{checked}"
    );
    let known = exposed();
    let agreed = agreed_names();
    let mut unknown = Vec::new();
    for (title, expr) in &queries {
        for name in metric_names(&as_promql(expr)) {
            if !known.contains(&name) && !agreed.contains_key(&name) {
                unknown.push(format!("{title}: {name}"));
            }
        }
    }
    assert!(unknown.is_empty(), "not exposed: {unknown:?}");
    // The panels the issue asks for.
    let titles: Vec<&str> = queries.iter().map(|(t, _)| t.as_str()).collect();
    for wanted in [
        "Jobs by state",
        "Feed to candidate",
        "Runs by outcome",
        "Runs without a verdict by reason",
        "Slots busy",
        "Window head-room",
        "Image store",
        "Keeper balance",
    ] {
        assert!(titles.contains(&wanted), "no panel {wanted}: {titles:?}");
    }
}

/// A typo in a rule's metric name would make it a rule that can never fire.
#[test]
fn every_alert_rule_names_only_exposed_metrics() {
    let known = exposed();
    let agreed = agreed_names();
    for alert in alerts() {
        let names = metric_names(&alert.expr);
        assert!(!names.is_empty(), "{}: {}", alert.name, alert.expr);
        for name in names {
            assert!(
                known.contains(&name) || agreed.contains_key(&name),
                "{}: {name} is neither on the worker's /metrics, in the signer's or keeper's \
                 --metrics-file nor in {NAMES}",
                alert.name
            );
        }
    }
}
