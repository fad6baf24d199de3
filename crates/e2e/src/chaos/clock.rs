//! Wall-clock steps on the real binaries, unchanged: libfaketime (`LD_PRELOAD`) in every
//! process the driver starts in a cycle with a `ClockStep`, reading its offset from a file
//! the driver rewrites (`FAKETIME_TIMESTAMP_FILE`, re-read on every call with
//! `FAKETIME_NO_CACHE=1`). The binaries are dynamically linked against glibc and Rust's
//! `SystemTime::now` calls glibc's `clock_gettime`, which the preload replaces (checked by
//! `probe_worker` against the real `worker`); the monotonic clock is left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as an NTP step leaves it.

use std::path::{Path, PathBuf};

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::{E2eError, s};

/// Where Debian and Ubuntu's `libfaketime` package puts the library.
const LIBFAKETIME_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// The library: `$CHAOS_LIBFAKETIME` if set, else the first of the packaged paths that exists.
pub fn find_libfaketime() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHAOS_LIBFAKETIME") {
        return Some(PathBuf::from(p));
    }
    LIBFAKETIME_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// One offset file and the environment that makes a process read it.
#[derive(Debug, Clone)]
pub struct FakeClock {
    lib: PathBuf,
    file: PathBuf,
}

impl FakeClock {
    /// A clock at offset 0 whose offset lives in `file`. Fails, naming the package, when
    /// libfaketime is not installed: a schedule with a clock step must not silently run
    /// without one.
    pub fn new(file: &Path) -> Result<Self, E2eError> {
        let lib = find_libfaketime().ok_or(E2eError::Setup {
            what: "find libfaketime for the wall-clock steps",
            detail: "install the `faketime` package (scripts/services.sh does), set \
                     CHAOS_LIBFAKETIME, or pass --no-clock"
                .into(),
        })?;
        let clock = Self {
            lib,
            file: file.to_path_buf(),
        };
        clock.set(0)?;
        Ok(clock)
    }

    /// The variables a process needs to run on this clock.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LD_PRELOAD", self.lib.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE", self.file.display().to_string()),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ]
    }

    /// Steps every process on this clock to the real time plus `offset_s` seconds. The file
    /// is replaced by a rename, so a process never reads half an offset.
    pub fn set(&self, offset_s: i64) -> Result<(), E2eError> {
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{offset_s:+}\n"))
            .map_err(crate::io("write the clock offset", &tmp))?;
        std::fs::rename(&tmp, &self.file).map_err(crate::io("replace the clock offset", &self.file))
    }
}

/// Seconds since the epoch of an ISO 8601 UTC time as `worker ledger --json` prints it
/// (`2026-12-01T10:00:00.123Z`; the fraction is dropped).
pub fn parse_utc(text: &str) -> Option<i64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut t = time.split(':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec = t.next()?.split('.').next()?.parse::<i64>().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + min * 60 + sec)
}

/// Checks that the preload really moves the real `worker`'s wall clock (a statically linked
/// or raw-syscall build would ignore it, and the clock steps would be a lie): `worker serve`
/// on a clock one day ahead, against a feed that answers nothing, must write its ledger
/// heartbeat a day ahead. Work files go under `dir`.
pub async fn probe_worker(worker: &Path, dir: &Path) -> Result<(), E2eError> {
    const AHEAD_S: i64 = 86_400;
    let fail = |detail: String| E2eError::Setup {
        what: "check that libfaketime moves the worker's wall clock",
        detail,
    };
    crate::fresh_dir(dir)?;
    let clock = FakeClock::new(&dir.join("offset"))?;
    clock.set(AHEAD_S)?;
    let state = dir.join("state");
    for d in ["state", "out", "staging", "scratch"] {
        let p = dir.join(d);
        std::fs::create_dir_all(&p).map_err(crate::io("create a probe directory", &p))?;
    }
    let log = dir.join("serve.stderr");
    let stderr = std::fs::File::create(&log).map_err(crate::io("create a log", &log))?;
    let mut child = tokio::process::Command::new(worker)
        .args([
            s("serve"),
            // Nothing listens on the discard port: every poll fails at once.
            s("--api"),
            s("http://127.0.0.1:9"),
            s("--verifier"),
            s("0x0000000000000000000000000000000000000001"),
            s("--out"),
            s(dir.join("out").display()),
            s("--state"),
            s(state.display()),
            s("--staging-root"),
            s(dir.join("staging").display()),
            s("--work-dir"),
            s(dir.join("scratch").display()),
            s("--poll-interval"),
            s(1),
            s("--parallel"),
            s(1),
        ])
        .envs(crate::logscan::JSON_LOG_ENV)
        .envs(clock.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .map_err(crate::io("start worker serve", worker))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let at = super::ledger::read_ledger(worker, &state)
            .await
            .and_then(|l| {
                l.pointer("/heartbeat/at")
                    .and_then(Value::as_str)
                    .and_then(parse_utc)
            });
        if let Some(at) = at {
            break Ok(at);
        }
        if let Ok(Some(exit)) = child.try_wait() {
            break Err(format!(
                "worker serve exited ({:?}) before writing a heartbeat; see {}",
                exit.code(),
                log.display()
            ));
        }
        if Instant::now() > deadline {
            break Err(format!(
                "no ledger heartbeat within 60 s; see {}",
                log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    if let Some(pid) = child.id() {
        super::inject::sigterm(pid);
    }
    let _ = tokio::time::timeout(Duration::from_secs(40), child.wait()).await;
    let _ = child.start_kill();
    let at = seen.map_err(fail)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let skew = at - now;
    if (skew - AHEAD_S).abs() > 600 {
        return Err(fail(format!(
            "the heartbeat of a worker started {AHEAD_S} s ahead is {skew} s from the real time: \
             libfaketime does not reach its clock"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_times_parse_to_unix_seconds() {
        assert_eq!(parse_utc("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_utc("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(parse_utc("2026-12-01T10:00:00.123Z"), Some(1_796_119_200));
        assert_eq!(parse_utc("2026-13-01T10:00:00Z"), None);
        assert_eq!(parse_utc("yesterday"), None);
    }
}
