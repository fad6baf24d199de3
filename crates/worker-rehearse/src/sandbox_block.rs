//! The `sandbox` block both `worker rehearse` and `worker plan` print: the container a manifest
//! gets, one aligned row per setting, each mount once.

use serde_json::Value;
use worker_sandbox::profile::Isolation;

/// One aligned `key value` row of a human report.
pub fn row(out: &mut String, key: &str, value: impl std::fmt::Display) {
    out.push_str(&format!("  {key:<24}{value}\n"));
}

/// The `sandbox` section of a manifest's container: exactly as it will be created.
pub fn rows(out: &mut String, m: &Value, s: &Isolation) {
    let num = |k: &str| m.get(k).and_then(Value::as_u64).unwrap_or(0);
    out.push_str("sandbox\n");
    row(
        out,
        "image",
        m.get("image").and_then(Value::as_str).unwrap_or(""),
    );
    row(
        out,
        "platform",
        m.get("platform").and_then(Value::as_str).unwrap_or(""),
    );
    row(
        out,
        "command",
        serde_json::to_string(&s.entrypoint).unwrap_or_default(),
    );
    row(
        out,
        "workdir / user",
        format!("{} as {}", s.working_dir, s.user),
    );
    row(out, "timeout", format!("{} s", num("timeout_seconds")));
    row(
        out,
        "cpu / memory / pids",
        format!(
            "{} millicores / {} MiB, no swap / {}",
            num("cpu_millis"),
            num("memory_bytes") >> 20,
            s.pids_limit
        ),
    );
    row(
        out,
        "output cap",
        format!("{} bytes (stdout+stderr)", num("max_output_bytes")),
    );
    row(out, "network", &s.network_mode);
    let mounts: Vec<String> = s
        .mounts
        .iter()
        .map(|b| format!("{} {}", b.target, if b.read_only { "ro" } else { "rw" }))
        .collect();
    row(out, "mounts", mounts.join(", "));
    let tmpfs: Vec<&str> = s.tmpfs.keys().map(String::as_str).collect();
    row(
        out,
        "filesystem",
        format!(
            "root {}; tmpfs {} ({} MiB each)",
            if s.readonly_rootfs {
                "read-only"
            } else {
                "writable"
            },
            tmpfs.join(", "),
            num("tmpfs_bytes") >> 20
        ),
    );
    row(
        out,
        "privileges",
        format!(
            "cap_drop {}; {}; init {}",
            s.cap_drop.join(","),
            s.security_opt.join(", "),
            s.init
        ),
    );
    row(out, "env", s.env.join(" "));
}
