//! `--shard i/n` (`worker feed` and `worker serve`): a deterministic partition of jobs by id, so n hosts (or an Actions matrix of
//! n) cover one feed without coordinating. Job `id` belongs to shard
//! `u64::from_be_bytes(sha256(id)[0..8]) mod n`; every host computes the same answer.

use sha2::{Digest, Sha256};

/// Shard `index` of `count` (`0/1`, the default, owns every job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl Default for Shard {
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

impl Shard {
    /// Whether this shard runs `job_id`.
    pub fn owns(&self, job_id: &str) -> bool {
        shard_of(job_id, self.count) == self.index
    }
}

/// The shard of `job_id` among `count` (`count` ≥ 1).
pub fn shard_of(job_id: &str, count: u64) -> u64 {
    let digest = Sha256::digest(job_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % count.max(1)
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected i/n with 0 <= i < n, got {s:?}");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(i) || !digits(n) {
            return Err(bad());
        }
        let (index, count) = (
            i.parse::<u64>().map_err(|_| bad())?,
            n.parse::<u64>().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn serve_shards_partition_every_job_exactly_once() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for k in 0..200 {
            let id = format!("job-{k}");
            assert_eq!(shards.iter().filter(|s| s.owns(&id)).count(), 1, "{id}");
        }
        assert!(Shard::default().owns("anything"));
    }

    #[test]
    fn serve_shard_formula_is_the_documented_one() {
        // sha256("a") = ca978112ca1bbdca…; 0xca978112ca1bbdca mod 7 computed independently.
        assert_eq!(shard_of("a", 7), 0xca97_8112_ca1b_bdca_u64 % 7);
    }

    #[test]
    fn serve_shard_flag_refuses_malformed_values() {
        for bad in [
            "", "1", "2/2", "0/0", "-1/2", "a/b", "1/2/3", " 0/2", "+0/2",
        ] {
            assert!(bad.parse::<Shard>().is_err(), "{bad:?}");
        }
        assert!("1/2".parse::<Shard>().is_ok());
    }
}
