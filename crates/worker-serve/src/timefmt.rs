//! Times and durations for people: `worker ledger` prints ISO 8601 UTC
//! (`2026-12-01T10:00:00.123Z`) and durations in seconds, never epoch milliseconds.

/// `ms` (unix milliseconds) as ISO 8601 UTC with milliseconds.
pub fn iso_utc(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// A duration of `ms` milliseconds for people: `0.250 s`, `12.5 s`, `3 min 20 s`, `2 h 5 min`.
pub fn human_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        format!("{:.3} s", ms as f64 / 1000.0)
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{} min {} s", ms / 60_000, ms / 1000 % 60)
    } else {
        format!("{} h {} min", ms / 3_600_000, ms / 60_000 % 60)
    }
}

/// The proleptic Gregorian date of day `z` since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_ledger_times_are_iso_8601_utc() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(1_000_000_000_000), "2001-09-09T01:46:40.000Z");
        assert_eq!(iso_utc(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(iso_utc(1_709_251_200_000), "2024-03-01T00:00:00.000Z");
        assert_eq!(iso_utc(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_utc(4_102_444_800_000), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn serve_ledger_durations_read_as_seconds_minutes_hours() {
        assert_eq!(human_duration(250), "0.250 s");
        assert_eq!(human_duration(12_500), "12.5 s");
        assert_eq!(human_duration(200_000), "3 min 20 s");
        assert_eq!(human_duration(7_500_000), "2 h 5 min");
        assert_eq!(human_duration(-5), "0.000 s");
    }
}
