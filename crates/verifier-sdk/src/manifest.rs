//! The runner manifest (`benchmark.runner_manifest`, PROTOCOL §3): strict parsing, every
//! rule, and the manifest and command hashes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::canonical::{compact_json_in_order, sha256_digest};
use crate::digest::TreeLimits;
use crate::types::Sha256Digest;

/// `schema_version` every manifest must carry.
pub const MANIFEST_SCHEMA_VERSION: &str = "agent-bounties/regression-sandbox-v1";
/// The only working directory allowed.
pub const WORKDIR: &str = "/workspace";
/// Platforms a manifest may name.
pub const PLATFORMS: [&str; 2] = ["linux/amd64", "linux/arm64"];
/// Most argv entries.
pub const MAX_ARGV_ENTRIES: usize = 64;
/// Longest single argv entry in bytes.
pub const MAX_ARGV_ENTRY_BYTES: usize = 4096;
/// Largest argv total in bytes (sum of entry lengths).
pub const MAX_ARGV_TOTAL_BYTES: usize = 16 * 1024;
/// Longest image name (the part before `@`); Docker refuses longer repository names.
pub const MAX_IMAGE_NAME_BYTES: usize = 255;
/// Program names refused as `argv[0]`: the protocol's list followed by ours.
pub const FORBIDDEN_PROGRAMS: [&str; 16] = [
    "sh",
    "bash",
    "dash",
    "zsh",
    "cmd",
    "cmd.exe",
    "powershell",
    "pwsh", // protocol
    "ash",
    "ksh",
    "mksh",
    "csh",
    "tcsh",
    "fish",
    "busybox",
    "env", // ours: also interpreters of strings
];

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// The manifest's fields in the order that is part of its hash.
pub const MANIFEST_FIELDS: [&str; 17] = [
    "schema_version",
    "image",
    "command",
    "workdir",
    "benchmark_digest",
    "timeout_seconds",
    "cpu_millis",
    "memory_bytes",
    "pids_limit",
    "max_output_bytes",
    "tmpfs_bytes",
    "max_source_bytes",
    "max_source_files",
    "max_benchmark_bytes",
    "max_benchmark_files",
    "platform",
    "test_seed",
];

/// Inclusive bounds of each numeric field (`test_seed` is any u64).
pub const NUMERIC_BOUNDS: [(&str, u64, u64); 11] = [
    ("timeout_seconds", 1, 900),
    ("cpu_millis", 100, 4000),
    ("memory_bytes", 64 * MIB, 4 * GIB),
    ("pids_limit", 16, 512),
    ("max_output_bytes", KIB, 16 * MIB),
    ("tmpfs_bytes", 64 * MIB, 4 * GIB),
    ("max_source_bytes", 1, 2 * GIB),
    ("max_source_files", 1, 100_000),
    ("max_benchmark_bytes", 1, 512 * MIB),
    ("max_benchmark_files", 1, 50_000),
    ("test_seed", 0, u64::MAX),
];

/// A runner manifest that passed every rule: built only by [`RunnerManifest::from_value`], so
/// its accessors cannot fail. Its serialization is the hash preimage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunnerManifest {
    #[serde(flatten)]
    fields: ManifestFields,
    /// The digest part of `image`, parsed once when the manifest was checked.
    #[serde(skip)]
    image_digest: Sha256Digest,
}

/// The manifest's fields, declared in hash order; serde rejects unknown fields and requires
/// every field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFields {
    /// Must be [`MANIFEST_SCHEMA_VERSION`].
    schema_version: String,
    /// `name@sha256:<64 lowercase hex>`.
    image: String,
    /// Direct argv; `argv[0]` is not a shell.
    command: Vec<String>,
    /// Must be [`WORKDIR`].
    workdir: String,
    /// Digest of the staged benchmark tree.
    benchmark_digest: Sha256Digest,
    /// Wall-clock limit from container start.
    timeout_seconds: u64,
    /// CPU quota in thousandths of a core.
    cpu_millis: u64,
    /// Memory (and memory+swap) limit.
    memory_bytes: u64,
    /// Process limit.
    pids_limit: u64,
    /// Cap on stdout and stderr together.
    max_output_bytes: u64,
    /// Size of the `/tmp` tmpfs; at most `memory_bytes`.
    tmpfs_bytes: u64,
    /// Byte cap of the source tree.
    max_source_bytes: u64,
    /// File cap of the source tree.
    max_source_files: u64,
    /// Byte cap of the benchmark tree.
    max_benchmark_bytes: u64,
    /// File cap of the benchmark tree.
    max_benchmark_files: u64,
    /// `linux/amd64` or `linux/arm64`.
    platform: String,
    /// Passed to the command as `AGENT_BOUNTIES_TEST_SEED`.
    test_seed: u64,
}

/// Why a runner manifest was rejected. One variant per rule of PROTOCOL §3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The manifest is not a JSON object.
    #[error("runner manifest is not a json object")]
    NotAnObject,
    /// A field outside the protocol's list is present.
    #[error("runner manifest has unknown field {0:?}{hint}", hint = closest_field_hint(.0))]
    UnknownField(String),
    /// A required field is absent.
    #[error("runner manifest is missing field {0:?}")]
    MissingField(&'static str),
    /// A field has the wrong JSON type (e.g. a negative or fractional number).
    #[error("runner manifest field has the wrong type: {0}")]
    WrongType(String),
    /// `schema_version` is not [`MANIFEST_SCHEMA_VERSION`].
    #[error("runner manifest schema_version is not {MANIFEST_SCHEMA_VERSION}")]
    SchemaVersion,
    /// The image reference breaks a rule; the reason says which.
    #[error("runner manifest image is invalid: {0}")]
    Image(&'static str),
    /// The argv is empty or has more than [`MAX_ARGV_ENTRIES`] entries.
    #[error("runner manifest command must have 1 to {MAX_ARGV_ENTRIES} entries, has {0}")]
    CommandEntries(usize),
    /// An argv entry is empty or longer than [`MAX_ARGV_ENTRY_BYTES`].
    #[error("runner manifest command entry {index} must be 1 to {MAX_ARGV_ENTRY_BYTES} bytes")]
    CommandEntryLength {
        /// Index of the entry.
        index: usize,
    },
    /// An argv entry holds NUL, CR or LF.
    #[error("runner manifest command entry {index} contains nul, cr or lf")]
    CommandEntryControl {
        /// Index of the entry.
        index: usize,
    },
    /// The argv totals more than [`MAX_ARGV_TOTAL_BYTES`].
    #[error("runner manifest command exceeds {MAX_ARGV_TOTAL_BYTES} bytes in total")]
    CommandTooLong,
    /// `argv[0]` names a shell or another string interpreter.
    #[error("runner manifest command must not start with the shell or launcher {0:?}")]
    ShellCommand(String),
    /// `workdir` is not [`WORKDIR`].
    #[error("runner manifest workdir must be {WORKDIR}")]
    Workdir,
    /// `benchmark_digest` is not `sha256:<64 lowercase hex>`.
    #[error("runner manifest benchmark_digest is not sha256:<64 lowercase hex>")]
    BenchmarkDigest,
    /// A numeric field is outside its inclusive bounds.
    #[error("runner manifest {field} = {value} is outside {min}..={max}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// `tmpfs_bytes` exceeds `memory_bytes`.
    #[error("runner manifest tmpfs_bytes exceeds memory_bytes")]
    TmpfsExceedsMemory,
    /// `platform` is not one of [`PLATFORMS`].
    #[error("runner manifest platform must be linux/amd64 or linux/arm64")]
    Platform,
}

impl RunnerManifest {
    /// Parses a manifest strictly from JSON (unknown or missing fields rejected) and checks
    /// every rule.
    pub fn from_value(v: &Value) -> Result<Self, ManifestError> {
        let obj = v.as_object().ok_or(ManifestError::NotAnObject)?;
        if let Some(unknown) = obj.keys().find(|k| !MANIFEST_FIELDS.contains(&k.as_str())) {
            return Err(ManifestError::UnknownField(
                unknown.chars().take(64).collect(),
            ));
        }
        if let Some(missing) = MANIFEST_FIELDS.iter().find(|f| !obj.contains_key(**f)) {
            return Err(ManifestError::MissingField(missing));
        }
        // Checked before serde so a bad digest gets its own error instead of a type error.
        if obj
            .get("benchmark_digest")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Sha256Digest>().ok())
            .is_none()
        {
            return Err(ManifestError::BenchmarkDigest);
        }
        let fields = ManifestFields::deserialize(v).map_err(|e| wrong_type(obj, &e))?;
        fields.validate()?;
        let image_digest = fields
            .image
            .split_once('@')
            .and_then(|(_, d)| d.parse().ok())
            .ok_or(ManifestError::Image(
                "digest must be sha256:<64 lowercase hex>",
            ))?;
        Ok(Self {
            fields,
            image_digest,
        })
    }

    /// The image's pinned digest (the part after `@`; [`validate_image`] checked it).
    pub fn image_digest(&self) -> Sha256Digest {
        self.image_digest
    }
    /// `schema_version` ([`MANIFEST_SCHEMA_VERSION`]).
    pub fn schema_version(&self) -> &str {
        &self.fields.schema_version
    }
    /// The image, `name@sha256:<64 lowercase hex>`.
    pub fn image(&self) -> &str {
        &self.fields.image
    }
    /// The direct argv; `argv[0]` is not a shell.
    pub fn command(&self) -> &[String] {
        &self.fields.command
    }
    /// The working directory ([`WORKDIR`]).
    pub fn workdir(&self) -> &str {
        &self.fields.workdir
    }
    /// Digest of the staged benchmark tree.
    pub fn benchmark_digest(&self) -> Sha256Digest {
        self.fields.benchmark_digest
    }
    /// The same manifest with another benchmark digest (a rehearsal fills in the placeholder
    /// with the staged tree's digest); every other rule still holds.
    #[must_use]
    pub fn with_benchmark_digest(mut self, digest: Sha256Digest) -> Self {
        self.fields.benchmark_digest = digest;
        self
    }
    /// Wall-clock limit from container start.
    pub fn timeout_seconds(&self) -> u64 {
        self.fields.timeout_seconds
    }
    /// CPU quota in thousandths of a core.
    pub fn cpu_millis(&self) -> u64 {
        self.fields.cpu_millis
    }
    /// Memory (and memory+swap) limit.
    pub fn memory_bytes(&self) -> u64 {
        self.fields.memory_bytes
    }
    /// Process limit.
    pub fn pids_limit(&self) -> u64 {
        self.fields.pids_limit
    }
    /// Cap on stdout and stderr together.
    pub fn max_output_bytes(&self) -> u64 {
        self.fields.max_output_bytes
    }
    /// Size of the `/tmp` tmpfs; at most `memory_bytes`.
    pub fn tmpfs_bytes(&self) -> u64 {
        self.fields.tmpfs_bytes
    }
    /// Byte cap of the source tree.
    pub fn max_source_bytes(&self) -> u64 {
        self.fields.max_source_bytes
    }
    /// File cap of the source tree.
    pub fn max_source_files(&self) -> u64 {
        self.fields.max_source_files
    }
    /// Byte cap of the benchmark tree.
    pub fn max_benchmark_bytes(&self) -> u64 {
        self.fields.max_benchmark_bytes
    }
    /// File cap of the benchmark tree.
    pub fn max_benchmark_files(&self) -> u64 {
        self.fields.max_benchmark_files
    }
    /// `linux/amd64` or `linux/arm64`.
    pub fn platform(&self) -> &str {
        &self.fields.platform
    }
    /// Passed to the command as `AGENT_BOUNTIES_TEST_SEED`.
    pub fn test_seed(&self) -> u64 {
        self.fields.test_seed
    }
    /// The source tree's caps (both at least 1 by [`NUMERIC_BOUNDS`]).
    pub fn source_limits(&self) -> TreeLimits {
        TreeLimits {
            max_bytes: self.fields.max_source_bytes,
            max_files: self.fields.max_source_files,
        }
    }
    /// The benchmark tree's caps (both at least 1 by [`NUMERIC_BOUNDS`]).
    pub fn benchmark_limits(&self) -> TreeLimits {
        TreeLimits {
            max_bytes: self.fields.max_benchmark_bytes,
            max_files: self.fields.max_benchmark_files,
        }
    }

    /// The manifest as a JSON object with keys in declared order (the hash preimage): its
    /// derived serialization, since the fields are declared in [`MANIFEST_FIELDS`] order.
    pub fn to_ordered_value(&self) -> Value {
        crate::canonical::ordered_value(self)
    }
}

impl ManifestFields {
    /// Checks every rule of PROTOCOL §3 (and our stricter shell list).
    fn validate(&self) -> Result<(), ManifestError> {
        if self.schema_version != MANIFEST_SCHEMA_VERSION {
            return Err(ManifestError::SchemaVersion);
        }
        validate_image(&self.image)?;
        validate_command(&self.command)?;
        if self.workdir != WORKDIR {
            return Err(ManifestError::Workdir);
        }
        for (field, min, max) in NUMERIC_BOUNDS {
            let value = self.numeric(field);
            if value < min || value > max {
                return Err(ManifestError::OutOfRange {
                    field,
                    value,
                    min,
                    max,
                });
            }
        }
        if self.tmpfs_bytes > self.memory_bytes {
            return Err(ManifestError::TmpfsExceedsMemory);
        }
        if !PLATFORMS.contains(&self.platform.as_str()) {
            return Err(ManifestError::Platform);
        }
        Ok(())
    }

    fn numeric(&self, field: &str) -> u64 {
        match field {
            "timeout_seconds" => self.timeout_seconds,
            "cpu_millis" => self.cpu_millis,
            "memory_bytes" => self.memory_bytes,
            "pids_limit" => self.pids_limit,
            "max_output_bytes" => self.max_output_bytes,
            "tmpfs_bytes" => self.tmpfs_bytes,
            "max_source_bytes" => self.max_source_bytes,
            "max_source_files" => self.max_source_files,
            "max_benchmark_bytes" => self.max_benchmark_bytes,
            "max_benchmark_files" => self.max_benchmark_files,
            _ => self.test_seed,
        }
    }
}

/// A type error naming the field: serde's own message for a `Value` has no path, and "expected
/// u64" does not say which of eleven numbers is wrong.
fn wrong_type(obj: &Map<String, Value>, error: &serde_json::Error) -> ManifestError {
    let field = MANIFEST_FIELDS.iter().find_map(|field| {
        let value = obj.get(*field)?;
        let failed = match *field {
            "command" => Vec::<String>::deserialize(value).err(),
            "schema_version" | "image" | "workdir" | "benchmark_digest" | "platform" => {
                String::deserialize(value).err()
            }
            _ => u64::deserialize(value).err(),
        };
        failed.map(|e| format!("{field}: {e}"))
    });
    ManifestError::WrongType(field.unwrap_or_else(|| error.to_string()))
}

/// `; did you mean "x"?` for the protocol field closest to an unknown one, when one is close.
fn closest_field_hint(unknown: &str) -> String {
    MANIFEST_FIELDS
        .iter()
        .map(|field| (edit_distance(unknown, field), field))
        .min()
        .filter(|(distance, field)| *distance <= 3.max(field.len() / 3))
        .map(|(_, field)| format!("; did you mean {field:?}?"))
        .unwrap_or_default()
}

/// Levenshtein distance over chars; both inputs are short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().take(64).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

fn command_value(argv: &[String]) -> Value {
    Value::Array(argv.iter().cloned().map(Value::String).collect())
}

/// `runner_manifest_hash`: `sha256:` + SHA-256 of the compact manifest in declared order.
pub fn runner_manifest_hash(manifest: &RunnerManifest) -> Sha256Digest {
    sha256_digest(compact_json_in_order(&manifest.to_ordered_value()).as_bytes())
}

/// `command_hash`: `sha256:` + SHA-256 of the compact argv array.
pub fn command_hash(argv: &[String]) -> Sha256Digest {
    sha256_digest(compact_json_in_order(&command_value(argv)).as_bytes())
}

/// Checks an image reference: `name@sha256:<64 lowercase hex>`, name in `[a-z0-9./:_-]`,
/// no `..`, no leading `-`, exactly one `@`.
pub fn validate_image(image: &str) -> Result<(), ManifestError> {
    if !image.contains('@') {
        return Err(ManifestError::Image(
            "has no digest (a tag can move): pin by digest: name@sha256:<64 hex>",
        ));
    }
    if image.matches('@').count() != 1 {
        return Err(ManifestError::Image("must contain exactly one @"));
    }
    let (name, digest) = image
        .split_once('@')
        .ok_or(ManifestError::Image("must contain exactly one @"))?;
    if name.is_empty() {
        return Err(ManifestError::Image("name is empty"));
    }
    if name.len() > MAX_IMAGE_NAME_BYTES {
        return Err(ManifestError::Image("name is longer than 255 bytes"));
    }
    if !name
        .bytes()
        .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'/' | b':' | b'_' | b'-'))
    {
        return Err(ManifestError::Image("name may only use [a-z0-9./:_-]"));
    }
    if name.contains("..") {
        return Err(ManifestError::Image("name contains .."));
    }
    if name.starts_with('-') {
        return Err(ManifestError::Image("name starts with -"));
    }
    digest
        .parse::<Sha256Digest>()
        .map_err(|_| ManifestError::Image("digest is not sha256:<64 lowercase hex>"))?;
    Ok(())
}

/// Checks a direct argv: entry count, entry and total sizes, no NUL/CR/LF, no shell.
pub fn validate_command(argv: &[String]) -> Result<(), ManifestError> {
    if argv.is_empty() || argv.len() > MAX_ARGV_ENTRIES {
        return Err(ManifestError::CommandEntries(argv.len()));
    }
    let mut total = 0usize;
    for (index, arg) in argv.iter().enumerate() {
        if arg.is_empty() || arg.len() > MAX_ARGV_ENTRY_BYTES {
            return Err(ManifestError::CommandEntryLength { index });
        }
        if arg.bytes().any(|b| matches!(b, b'\0' | b'\r' | b'\n')) {
            return Err(ManifestError::CommandEntryControl { index });
        }
        total += arg.len();
    }
    if total > MAX_ARGV_TOTAL_BYTES {
        return Err(ManifestError::CommandTooLong);
    }
    if let Some(program) = argv.first() {
        // Splitting on `\` as well catches Windows-style paths such as `C:\...\cmd.exe`.
        let last = program
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(program)
            .to_lowercase();
        if FORBIDDEN_PROGRAMS.contains(&last.as_str()) {
            return Err(ManifestError::ShellCommand(last.chars().take(64).collect()));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// The manifest of the PROTOCOL §5 vector.
    pub(crate) fn vector_manifest_value() -> Value {
        json!({
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "image": format!("ghcr.io/agent-bounties/rust-verifier@sha256:{}", "b".repeat(64)),
            "command": ["cargo", "test", "--locked", "--target-dir", "/tmp/target"],
            "workdir": "/workspace",
            "benchmark_digest": format!("sha256:{}", "a".repeat(64)),
            "timeout_seconds": 120,
            "cpu_millis": 1000,
            "memory_bytes": 512 * MIB,
            "pids_limit": 128,
            "max_output_bytes": MIB,
            "tmpfs_bytes": 256 * MIB,
            "max_source_bytes": 512 * MIB,
            "max_source_files": 50000,
            "max_benchmark_bytes": 64 * MIB,
            "max_benchmark_files": 10000,
            "platform": "linux/amd64",
            "test_seed": 1
        })
    }

    pub(crate) fn vector_manifest() -> RunnerManifest {
        RunnerManifest::from_value(&vector_manifest_value()).unwrap()
    }

    fn with(field: &str, value: Value) -> Result<RunnerManifest, ManifestError> {
        let mut v = vector_manifest_value();
        v.as_object_mut().unwrap().insert(field.into(), value);
        RunnerManifest::from_value(&v)
    }

    #[test]
    fn golden_manifest_and_command_hashes() {
        let m = vector_manifest();
        assert_eq!(
            runner_manifest_hash(&m).to_string(),
            "sha256:4143e42ceb590751a31719cc251bcbae73af24b4bc7dea4e962246ef047b032f"
        );
        assert_eq!(
            command_hash(m.command()).to_string(),
            "sha256:db047e0937d1d5658583d413b8d33780e2915eba423edb17c6082cb6b7330f5b"
        );
    }

    #[test]
    fn manifest_hash_uses_declared_order_even_when_input_is_reordered() {
        let v = vector_manifest_value();
        let mut entries: Vec<_> = v.as_object().unwrap().clone().into_iter().collect();
        entries.reverse();
        let reordered = Value::Object(entries.into_iter().collect());
        let m = RunnerManifest::from_value(&reordered).unwrap();
        assert_eq!(
            runner_manifest_hash(&m),
            runner_manifest_hash(&vector_manifest())
        );
        // And the typed serialization agrees with the preimage used for hashing.
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            compact_json_in_order(&m.to_ordered_value())
        );
    }

    #[test]
    fn every_field_changes_the_hash() {
        let base = runner_manifest_hash(&vector_manifest());
        let mutations: Vec<(&str, Value)> = vec![
            (
                "image",
                json!(format!(
                    "ghcr.io/agent-bounties/rust-verifier@sha256:{}",
                    "c".repeat(64)
                )),
            ),
            ("command", json!(["cargo", "test"])),
            (
                "benchmark_digest",
                json!(format!("sha256:{}", "f".repeat(64))),
            ),
            ("timeout_seconds", json!(121)),
            ("cpu_millis", json!(1001)),
            ("memory_bytes", json!(512 * MIB + 1)),
            ("pids_limit", json!(129)),
            ("max_output_bytes", json!(MIB + 1)),
            ("tmpfs_bytes", json!(256 * MIB + 1)),
            ("max_source_bytes", json!(512 * MIB + 1)),
            ("max_source_files", json!(50001)),
            ("max_benchmark_bytes", json!(64 * MIB + 1)),
            ("max_benchmark_files", json!(10001)),
            ("platform", json!("linux/arm64")),
            ("test_seed", json!(2)),
        ];
        for (field, value) in mutations {
            let m = with(field, value).unwrap();
            assert_ne!(runner_manifest_hash(&m), base, "{field}");
        }
    }

    #[test]
    fn strict_shape() {
        let mut v = vector_manifest_value();
        v.as_object_mut().unwrap().insert("extra".into(), json!(1));
        assert_eq!(
            RunnerManifest::from_value(&v),
            Err(ManifestError::UnknownField("extra".into()))
        );
        for field in MANIFEST_FIELDS {
            let mut v = vector_manifest_value();
            v.as_object_mut().unwrap().remove(field);
            assert_eq!(
                RunnerManifest::from_value(&v),
                Err(ManifestError::MissingField(field)),
                "{field}"
            );
        }
        assert!(matches!(
            with("timeout_seconds", json!(-1)),
            Err(ManifestError::WrongType(_))
        ));
        assert!(matches!(
            with("timeout_seconds", json!(120.5)),
            Err(ManifestError::WrongType(_))
        ));
        assert!(matches!(
            with("timeout_seconds", json!("120")),
            Err(ManifestError::WrongType(_))
        ));
        assert!(matches!(
            with("command", json!("cargo test")),
            Err(ManifestError::WrongType(_))
        ));
        // The author is told which field, the closest real one, and how to pin an image.
        let text = |r: Result<RunnerManifest, ManifestError>| r.unwrap_err().to_string();
        let wrong = text(with("timeout_seconds", json!("120")));
        assert!(
            wrong.contains("timeout_seconds: invalid type: string \"120\", expected u64"),
            "{wrong}"
        );
        assert!(text(with("command", json!("cargo test"))).contains("command: "));
        let mut v = vector_manifest_value();
        v.as_object_mut()
            .unwrap()
            .insert("timeout_secs".into(), json!(1));
        let unknown = text(RunnerManifest::from_value(&v));
        assert!(
            unknown.ends_with("unknown field \"timeout_secs\"; did you mean \"timeout_seconds\"?"),
            "{unknown}"
        );
        assert!(!text(with("network", json!("none"))).contains("did you mean"));
        let tag = text(with("image", json!("python:3.12")));
        assert!(tag.contains("pin by digest: name@sha256:<64 hex>"), "{tag}");
        assert_eq!(
            RunnerManifest::from_value(&json!([])),
            Err(ManifestError::NotAnObject)
        );
    }

    #[test]
    fn fixed_string_fields() {
        assert_eq!(
            with(
                "schema_version",
                json!("agent-bounties/regression-sandbox-v2")
            ),
            Err(ManifestError::SchemaVersion)
        );
        assert_eq!(
            with("workdir", json!("/workspace/")),
            Err(ManifestError::Workdir)
        );
        assert_eq!(
            with("platform", json!("linux/riscv64")),
            Err(ManifestError::Platform)
        );
        assert_eq!(
            with("platform", json!("Linux/amd64")),
            Err(ManifestError::Platform)
        );
        assert_eq!(
            with(
                "benchmark_digest",
                json!(format!("sha256:{}", "A".repeat(64)))
            ),
            Err(ManifestError::BenchmarkDigest)
        );
        assert_eq!(
            with("benchmark_digest", json!(format!("0x{}", "a".repeat(64)))),
            Err(ManifestError::BenchmarkDigest)
        );
    }

    #[test]
    fn image_rules() {
        let d = format!("sha256:{}", "b".repeat(64));
        assert!(validate_image(&format!("registry:5000/a_b/c-d.e@{d}")).is_ok());
        for bad in [
            format!("ghcr.io/x@y@{d}"),
            "ghcr.io/x:latest".to_string(),
            format!("@{d}"),
            format!("Ghcr.io/x@{d}"),
            format!("ghcr.io/x y@{d}"),
            format!("ghcr.io/../x@{d}"),
            format!("-ghcr.io/x@{d}"),
            format!("ghcr.io/x@sha256:{}", "B".repeat(64)),
            format!("ghcr.io/x@sha256:{}", "b".repeat(63)),
            format!("ghcr.io/x@sha512:{}", "b".repeat(64)),
            format!("{}@{d}", "a".repeat(256)),
        ] {
            assert!(
                matches!(validate_image(&bad), Err(ManifestError::Image(_))),
                "{bad}"
            );
        }
        assert!(validate_image(&format!("{}@{d}", "a".repeat(255))).is_ok());
    }

    #[test]
    fn command_limits_at_and_past_the_edge() {
        let s = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(validate_command(&[]), Err(ManifestError::CommandEntries(0)));
        assert!(validate_command(&vec!["x".to_string(); 64]).is_ok());
        assert_eq!(
            validate_command(&vec!["x".to_string(); 65]),
            Err(ManifestError::CommandEntries(65))
        );
        assert_eq!(
            validate_command(&s(vec!["cargo", ""])),
            Err(ManifestError::CommandEntryLength { index: 1 })
        );
        assert!(validate_command(&["x".repeat(4096)]).is_ok());
        assert_eq!(
            validate_command(&["x".repeat(4097)]),
            Err(ManifestError::CommandEntryLength { index: 0 })
        );
        for bad in ["a\0b", "a\nb", "a\rb"] {
            assert_eq!(
                validate_command(&s(vec!["cargo", bad])),
                Err(ManifestError::CommandEntryControl { index: 1 })
            );
        }
        assert!(validate_command(&vec!["x".repeat(4096); 4]).is_ok());
        let mut over = vec!["x".repeat(4096); 4];
        over.push("y".into());
        assert_eq!(validate_command(&over), Err(ManifestError::CommandTooLong));
    }

    #[test]
    fn shells_and_launchers_are_refused_by_last_segment_case_insensitively() {
        for program in [
            "sh",
            "/bin/sh",
            "/usr/bin/BASH",
            "dash",
            "zsh",
            "cmd",
            "C:\\Windows\\System32\\CMD.EXE",
            "powershell",
            "pwsh",
            "ash",
            "/bin/ksh",
            "mksh",
            "csh",
            "tcsh",
            "fish",
            "/bin/busybox",
            "/usr/bin/env",
        ] {
            let argv = vec![program.to_string(), "-c".into(), "true".into()];
            assert!(
                matches!(validate_command(&argv), Err(ManifestError::ShellCommand(_))),
                "{program}"
            );
        }
        for program in [
            "cargo",
            "/usr/bin/python3",
            "shx",
            "bashful",
            "/bin/sh/cargo",
        ] {
            assert!(
                validate_command(&[program.to_string()]).is_ok(),
                "{program}"
            );
        }
    }

    #[test]
    fn numeric_bounds_are_inclusive_and_enforced() {
        for (field, min, max) in NUMERIC_BOUNDS {
            if field == "test_seed" {
                continue;
            }
            // tmpfs must stay within memory, so probe tmpfs with memory at its maximum.
            let probe = |value: u64| {
                let mut v = vector_manifest_value();
                let o = v.as_object_mut().unwrap();
                o.insert("memory_bytes".into(), json!(4 * GIB));
                o.insert(field.into(), json!(value));
                if field == "memory_bytes" {
                    o.insert("tmpfs_bytes".into(), json!(64 * MIB));
                }
                RunnerManifest::from_value(&v)
            };
            assert!(probe(min).is_ok(), "{field} min");
            assert!(probe(max).is_ok(), "{field} max");
            assert_eq!(
                probe(min - 1),
                Err(ManifestError::OutOfRange {
                    field,
                    value: min - 1,
                    min,
                    max
                }),
                "{field}"
            );
            assert_eq!(
                probe(max + 1),
                Err(ManifestError::OutOfRange {
                    field,
                    value: max + 1,
                    min,
                    max
                }),
                "{field}"
            );
        }
        assert!(with("test_seed", json!(u64::MAX)).is_ok());
        assert!(with("test_seed", json!(0)).is_ok());
    }

    #[test]
    fn tmpfs_must_fit_in_memory() {
        let mut v = vector_manifest_value();
        v["tmpfs_bytes"] = json!(512 * MIB);
        assert!(RunnerManifest::from_value(&v).is_ok());
        v["tmpfs_bytes"] = json!(512 * MIB + 1);
        assert_eq!(
            RunnerManifest::from_value(&v),
            Err(ManifestError::TmpfsExceedsMemory)
        );
    }
}
