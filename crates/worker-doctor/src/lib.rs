//! `worker doctor`: a host preflight in the spirit of isolate's environment check. Every line
//! is `ok`, `warn` or `fail`, says what was found and, unless it is `ok`, what to do.
//!
//! The checks are pure functions of facts ([`Facts`]): what the engine answered (gathered by
//! the worker's engine client, the only code that talks to Docker), what this host's `/proc`,
//! `/sys` and staging root show ([`host`]), and the latest block of an RPC when one is given.
//! So every verdict here is tested with the facts of the hosts it is meant for, this
//! project's Debian VM (hybrid cgroups, no seccomp in the engine) among them.

pub mod host;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

pub use host::{CgroupLayout, HostFacts, StagingFacts};

/// Below this much free space on the staging root a run's trees may not fit: `fail`.
pub const STAGING_FAIL_BYTES: u64 = 1 << 30;
/// Below this much: `warn`.
pub const STAGING_WARN_BYTES: u64 = 10 << 30;
/// The chain's latest block may be this far ahead of this clock before it is a `fail`
/// (attestation deadlines count from whichever is later; a clock running late signs
/// attestations whose deadline the contract sees as closer).
pub const CLOCK_AHEAD_FAIL_SECS: u64 = 120;
/// The latest block may be this far behind this clock before it is a `warn` (a stalled RPC,
/// or a development chain that mines only on demand).
pub const CLOCK_BEHIND_WARN_SECS: u64 = 300;

/// A line's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Works, with a caveat worth knowing.
    Warn,
    /// The worker cannot be trusted to run here until this is fixed.
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable name of the check (`engine`, `cgroups`, `oci_runtime`, …).
    pub name: &'static str,
    /// Its verdict.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do; `None` when `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// A runtime as the engine has it registered (`/info` `Runtimes`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeEntry {
    /// The binary.
    pub path: String,
    /// `runtimeArgs`.
    pub args: Vec<String>,
    /// First line of `<path> --version` on this host, when it could be run.
    pub version: Option<String>,
}

/// What the engine answered to `/version` and `/info`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EngineFacts {
    /// Engine version.
    pub version: String,
    /// Engine API version.
    pub api_version: String,
    /// `1` or `2`, as the engine reports it.
    pub cgroup_version: String,
    /// `cgroupfs` or `systemd`.
    pub cgroup_driver: String,
    /// Registered OCI runtimes by name.
    pub runtimes: BTreeMap<String, RuntimeEntry>,
    /// The daemon's `default-runtime`.
    pub default_runtime: String,
    /// `SecurityOptions`, e.g. `name=seccomp,profile=default`, `name=apparmor`, `name=userns`.
    pub security_options: Vec<String>,
    /// `SwapLimit`: the engine can limit memory+swap.
    pub swap_limit: bool,
}

/// Whether the image asked about is present, by digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageFacts {
    /// The digest-pinned reference asked about.
    pub reference: String,
    /// `Ok(true)` when the engine holds an image with that repo digest.
    pub present: Result<bool, String>,
}

/// The clock against an RPC's latest block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClockFacts {
    /// The RPC asked (without credentials: the caller strips them).
    pub rpc: String,
    /// The latest block's timestamp, or why it could not be read.
    pub block_timestamp: Result<u64, String>,
    /// This host's clock, unix seconds, when the block was read.
    pub now: u64,
}

/// Everything the checks look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The engine's answers, or why it could not be reached.
    pub engine: Result<EngineFacts, String>,
    /// This host's own facts.
    pub host: HostFacts,
    /// The OCI runtime the worker is to run under (`--oci-runtime`); `None` for runc.
    pub oci_runtime: Option<String>,
    /// `--image`, when given.
    pub image: Option<ImageFacts>,
    /// `--rpc`, when given.
    pub clock: Option<ClockFacts>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Schema of the JSON form, under the key every other worker output uses (v1 named it
    /// `schema`).
    pub schema_version: &'static str,
    /// The worst status of any line.
    pub status: Status,
    /// One line per check, in a fixed order.
    pub checks: Vec<Check>,
}

/// `schema_version` of [`Report`]. v1 → v2: the key is `schema_version`, as in every other
/// worker output (v1 named it `schema`); nothing else changed.
pub const REPORT_SCHEMA: &str = "agent-bounties/worker-doctor-v2";

impl Report {
    /// Whether any line is `fail`.
    pub fn failed(&self) -> bool {
        self.status == Status::Fail
    }

    /// The human form: one line per check, the fix indented below it.
    pub fn human(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let _ = writeln!(
                out,
                "{:<4}  {:<12}  {}",
                c.status.as_str(),
                c.name,
                c.detail
            );
            if let Some(fix) = &c.fix {
                let _ = writeln!(out, "{:<4}  {:<12}  -> {}", "", "", fix);
            }
        }
        let _ = writeln!(out, "doctor: {}", self.status.as_str());
        out
    }
}

/// Runs every check on `facts`.
pub fn examine(facts: &Facts) -> Report {
    let mut checks = vec![engine(&facts.engine)];
    checks.push(cgroups(&facts.host, facts.engine.as_ref().ok()));
    if let Ok(engine) = &facts.engine {
        checks.push(oci_runtime(engine, facts.oci_runtime.as_deref()));
        checks.push(userns(engine));
        checks.push(seccomp(engine));
    }
    checks.push(apparmor(&facts.host, facts.engine.as_ref().ok()));
    checks.push(staging(&facts.host));
    if let Some(uids) = &facts.host.sandbox_uids {
        checks.push(sandbox_uids(uids));
    }
    checks.push(swap(&facts.host, facts.engine.as_ref().ok()));
    if let Some(image) = &facts.image {
        checks.push(image_check(image));
    }
    if let Some(clock) = &facts.clock {
        checks.push(clock_check(clock));
    }
    let status = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    Report {
        schema_version: REPORT_SCHEMA,
        status,
        checks,
    }
}

/// How the worker's message for a Docker socket that refused this user begins
/// (`worker_docker::endpoint::SOCKET_DENIED`, which a test keeps equal).
pub const SOCKET_DENIED: &str = "permission denied on the Docker daemon's socket";

fn engine(engine: &Result<EngineFacts, String>) -> Check {
    match engine {
        Ok(e) => Check::ok(
            "engine",
            format!(
                "Docker Engine {} (API {}) answers",
                e.version, e.api_version
            ),
        ),
        // The socket refused this user (the worker's message names its permissions): the
        // daemon runs, so "start dockerd" would be the wrong way.
        Err(why) if why.starts_with(SOCKET_DENIED) => Check::fail(
            "engine",
            why.clone(),
            "run the worker as root or as a member of the socket's group (`docker` in Docker's \
             packages: `sudo usermod -aG docker <user>`, then log in again); that membership is \
             root-equivalent (the socket starts privileged containers), so grant it only to \
             the account that runs the worker",
        ),
        Err(why) => Check::fail(
            "engine",
            format!("the Docker Engine does not answer: {why}"),
            "start dockerd (or docker.service), check DOCKER_HOST, and that this user may use \
             /var/run/docker.sock",
        ),
    }
}

fn cgroups(host: &HostFacts, engine: Option<&EngineFacts>) -> Check {
    let seen = match engine {
        Some(e) => format!(
            "; the engine uses cgroup v{} with the {} driver",
            e.cgroup_version, e.cgroup_driver
        ),
        None => String::new(),
    };
    match host.cgroup {
        CgroupLayout::V2 => Check::ok("cgroups", format!("cgroup v2 (unified){seen}")),
        CgroupLayout::V1 => Check::ok("cgroups", format!("cgroup v1{seen}")),
        CgroupLayout::Hybrid => Check::warn(
            "cgroups",
            format!(
                "hybrid cgroups: v1 controllers with a cgroup2 mount at /sys/fs/cgroup/unified{seen}"
            ),
            "limits hold through the v1 controllers (memory, pids, cpu); crun does not run on \
             this layout, and pids.peak is absent on older kernels; booting with \
             systemd.unified_cgroup_hierarchy=1 gives plain v2",
        ),
        CgroupLayout::Unknown => Check::fail(
            "cgroups",
            format!("no cgroup hierarchy found under /sys/fs/cgroup{seen}"),
            "mount cgroups (v2 preferred): without them no limit of the profile holds",
        ),
    }
}

fn runtime_line(name: &str, entry: &RuntimeEntry) -> String {
    let mut line = format!("{name} ({}", entry.path);
    if !entry.args.is_empty() {
        let _ = write!(line, " {}", entry.args.join(" "));
    }
    if let Some(version) = &entry.version {
        let _ = write!(line, "; {version}");
    }
    line.push(')');
    line
}

fn oci_runtime(engine: &EngineFacts, wanted: Option<&str>) -> Check {
    let listed: Vec<String> = engine
        .runtimes
        .iter()
        .map(|(name, entry)| runtime_line(name, entry))
        .collect();
    let detail = format!(
        "runtimes: {}; default {}",
        listed.join(", "),
        if engine.default_runtime.is_empty() {
            "?"
        } else {
            &engine.default_runtime
        }
    );
    let wanted = wanted.unwrap_or("runc");
    let Some(entry) = engine.runtimes.get(wanted) else {
        return Check::fail(
            "oci_runtime",
            format!("{detail}; {wanted} (--oci-runtime) is not registered"),
            format!(
                "register it in /etc/docker/daemon.json under \"runtimes\" and reload dockerd \
                 (scripts/services.sh --runsc does this for runsc), or run without \
                 --oci-runtime {wanted}"
            ),
        );
    };
    // The binary's own version line names what it is (`runsc version …`, `runc version …`):
    // an entry registered as runsc whose binary is runc is refused here as the signer refuses
    // its runs (`verifier_sdk::oci_runtime::check_consistent`), not reported as runsc.
    if let Some(version) = &entry.version
        && matches!(wanted, "runc" | "runsc")
        && !version.starts_with(&format!("{wanted} version "))
    {
        return Check::fail(
            "oci_runtime",
            format!(
                "{detail}; the engine's {wanted} entry is not {wanted}: `{} --version` says \"{version}\"",
                entry.path
            ),
            format!(
                "point runtimes.{wanted}.path in /etc/docker/daemon.json at the {wanted} binary \
                 and reload dockerd (scripts/services.sh --runsc registers runsc); the signer \
                 refuses evidence whose {wanted} reports another runtime's version"
            ),
        );
    }
    if wanted == "runsc" {
        if !entry.args.iter().any(|a| a == "--network=none") {
            return Check::fail(
                "oci_runtime",
                format!("{detail}; runsc is registered without --network=none"),
                "add \"--network=none\" to runtimeArgs of runtimes.runsc: `docker run --network \
                 none --runtime runsc` does not start without it",
            );
        }
        if entry.version.is_none() {
            return Check::warn(
                "oci_runtime",
                format!("{detail}; `{} --version` could not be run here", entry.path),
                "evidence records the runtime's version from this binary: run the worker on \
                 the engine's host",
            );
        }
    }
    Check::ok(
        "oci_runtime",
        format!("{detail}; the worker runs under {wanted}"),
    )
}

fn has_option(engine: &EngineFacts, name: &str) -> bool {
    let key = format!("name={name}");
    engine
        .security_options
        .iter()
        .any(|o| o.split(',').any(|part| part == key))
}

fn userns(engine: &EngineFacts) -> Check {
    if has_option(engine, "userns") {
        Check::warn(
            "userns",
            "the engine remaps user namespaces (userns-remap)",
            "each sandbox's own uid (60578-61183) is then a subordinate uid on the host; staged \
             trees must be readable by it, and the profile was verified without remapping",
        )
    } else {
        Check::ok(
            "userns",
            "no user-namespace remapping (each sandbox runs as a host uid of its own, \
             60578-61183)",
        )
    }
}

fn seccomp(engine: &EngineFacts) -> Check {
    match engine
        .security_options
        .iter()
        .find(|o| o.split(',').any(|p| p == "name=seccomp"))
    {
        Some(option) => Check::ok("seccomp", format!("the engine applies seccomp ({option})")),
        None => Check::warn(
            "seccomp",
            "the engine applies no seccomp filter (an engine built without it, or a kernel \
             without CONFIG_SECCOMP_FILTER)",
            "the containers get every syscall the capabilities allow; use an engine built with \
             seccomp, or runsc (--oci-runtime runsc), whose Sentry serves the syscalls itself",
        ),
    }
}

fn apparmor(host: &HostFacts, engine: Option<&EngineFacts>) -> Check {
    let in_engine = engine.is_some_and(|e| has_option(e, "apparmor"));
    match (host.apparmor_enabled, in_engine) {
        (_, true) => Check::ok("apparmor", "the engine confines containers with AppArmor"),
        (Some(true), false) => Check::warn(
            "apparmor",
            "AppArmor is enabled on the host but the engine does not use it",
            "install apparmor (and its parser) so the engine loads docker-default",
        ),
        (_, false) => Check::warn(
            "apparmor",
            "AppArmor is not available on this host",
            "optional: the profile does not rely on it (no capabilities, no-new-privileges, \
             read-only root); enable it where the distribution supports it",
        ),
    }
}

fn gib(bytes: u64) -> String {
    // One decimal place, without floats.
    let tenths = bytes.saturating_mul(10) / (1 << 30);
    format!("{}.{} GiB", tenths / 10, tenths % 10)
}

fn sandbox_uids(uids: &host::SandboxUidFacts) -> Check {
    let range = format!("{}-{}", uids.first, uids.first + uids.count - 1);
    let lock_dir = uids.lock_dir.display();
    let leased = match &uids.lease {
        Ok(uid) => *uid,
        Err(why) => {
            return Check::fail(
                "sandbox_uids",
                format!("no sandbox uid of {range} could be leased: {why}"),
                format!(
                    "every run would end without a verdict: make {lock_dir} a directory every \
                     worker can write (root-owned, mode 1777), move host accounts out of \
                     {range}, or wait for the running sandboxes to end"
                ),
            );
        }
    };
    let detail = format!(
        "each sandbox runs as a host uid of its own from {range}; a lease under {lock_dir} \
         works (took {leased} and gave it back)"
    );
    if uids.claimed > 0 {
        return Check::warn(
            "sandbox_uids",
            format!(
                "{detail}; {} of its {} uids belong to host accounts, groups or subordinate \
                 ranges and are never used",
                uids.claimed, uids.count
            ),
            format!("move those accounts out of {range} so every uid of it can be leased"),
        );
    }
    Check::ok("sandbox_uids", detail)
}

fn staging(host: &HostFacts) -> Check {
    let Some(staging) = &host.staging else {
        return Check::warn(
            "staging",
            "no staging root given",
            "pass --staging-root (or set REGRESSION_SANDBOX_STAGING_ROOT) to check its file \
             system and free space",
        );
    };
    let facts = match &staging.facts {
        Ok(facts) => facts,
        Err(why) => {
            return Check::fail(
                "staging",
                format!("{}: {why}", staging.path.display()),
                "create it (mode 0700, owned by the worker's user) on a local disk file system",
            );
        }
    };
    let detail = format!(
        "{} on {} with {} free",
        staging.path.display(),
        facts.fs_type,
        gib(facts.free_bytes)
    );
    if facts.free_bytes < STAGING_FAIL_BYTES {
        return Check::fail(
            "staging",
            detail,
            format!(
                "free space on it: below {} a job's trees may not fit",
                gib(STAGING_FAIL_BYTES)
            ),
        );
    }
    if matches!(facts.fs_type.as_str(), "tmpfs" | "ramfs") {
        return Check::warn(
            "staging",
            detail,
            "a memory file system: staged trees then compete with the containers for memory; \
             use a disk",
        );
    }
    if matches!(facts.fs_type.as_str(), "nfs" | "cifs" | "fuse" | "overlay") {
        return Check::warn(
            "staging",
            detail,
            "a network or overlay file system: bind mounts of it into containers are slow or \
             unsupported; use a local disk",
        );
    }
    if facts.free_bytes < STAGING_WARN_BYTES {
        return Check::warn(
            "staging",
            detail,
            format!(
                "free space on it: below {} large jobs may not fit",
                gib(STAGING_WARN_BYTES)
            ),
        );
    }
    Check::ok("staging", detail)
}

fn swap(host: &HostFacts, engine: Option<&EngineFacts>) -> Check {
    match (host.swap_total_bytes, engine.map(|e| e.swap_limit)) {
        (None, _) => Check::warn(
            "swap",
            "could not read SwapTotal from /proc/meminfo",
            "check `free`: with swap and no swap accounting a container may swap past memory_bytes",
        ),
        (Some(0), _) => Check::ok(
            "swap",
            "no swap: memory_bytes bounds each container's memory",
        ),
        (Some(total), Some(true)) => Check::ok(
            "swap",
            format!(
                "{} of swap; the engine limits memory+swap, which the profile sets to memory_bytes",
                gib(total)
            ),
        ),
        (Some(total), _) => Check::fail(
            "swap",
            format!(
                "{} of swap and the engine cannot limit memory+swap (no swap accounting)",
                gib(total)
            ),
            "turn swap off (swapoff -a) or boot with swapaccount=1: otherwise a container can \
             use memory_bytes of RAM plus any amount of swap",
        ),
    }
}

fn image_check(image: &ImageFacts) -> Check {
    match &image.present {
        Ok(true) => Check::ok("image", format!("{} is present", image.reference)),
        Ok(false) => Check::fail(
            "image",
            format!("{} is not present", image.reference),
            format!(
                "docker pull {}: the worker never pulls, a missing image is a run without verdict",
                image.reference
            ),
        ),
        Err(why) => Check::fail(
            "image",
            format!("{}: {why}", image.reference),
            "give a digest-pinned reference (name@sha256:…)",
        ),
    }
}

fn clock_check(clock: &ClockFacts) -> Check {
    let block = match &clock.block_timestamp {
        Ok(t) => *t,
        Err(why) => {
            return Check::fail(
                "clock",
                format!("could not read the latest block of {}: {why}", clock.rpc),
                "check the RPC URL and that it answers eth_getBlockByNumber",
            );
        }
    };
    if block > clock.now {
        let ahead = block - clock.now;
        let detail = format!(
            "the latest block of {} is {ahead} s ahead of this clock",
            clock.rpc
        );
        if ahead > CLOCK_AHEAD_FAIL_SECS {
            return Check::fail(
                "clock",
                detail,
                "this clock runs late: synchronise it (chrony/systemd-timesyncd)",
            );
        }
        return Check::ok("clock", detail);
    }
    let behind = clock.now - block;
    let detail = format!(
        "the latest block of {} is {behind} s behind this clock",
        clock.rpc
    );
    if behind > CLOCK_BEHIND_WARN_SECS {
        return Check::warn(
            "clock",
            detail,
            "a stalled RPC, a development chain that mines only on demand, or this clock runs \
             early: compare with another RPC and synchronise the clock",
        );
    }
    Check::ok("clock", detail)
}

#[cfg(test)]
mod tests;
