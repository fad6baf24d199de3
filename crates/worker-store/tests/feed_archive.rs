//! The exact-commit archive extractor against hostile archives, its caps at their edges, and a
//! property test over arbitrary entry lists.

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use test_feed::*;
use verifier_sdk::RelativeDir;
use worker_store::archive::{ArchiveError, ArchiveLimits, Extracted, extract_tar_gz};

const TOP: &str = "solution-0123456789abcdef0123456789abcdef01234567";

fn roomy() -> ArchiveLimits {
    ArchiveLimits {
        max_compressed_bytes: 64 << 20,
        max_uncompressed_bytes: 64 << 20,
        max_entries: 1000,
        max_tree_bytes: 64 << 20,
        max_tree_files: 1000,
    }
}

struct Scratch {
    _dir: tempfile::TempDir,
    root: PathBuf,
    dest: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    fs::write(root.join("sentinel"), b"untouched").unwrap();
    let dest = root.join("out");
    Scratch {
        _dir: dir,
        root,
        dest,
    }
}

fn extract(
    s: &Scratch,
    gz: &[u8],
    sub: &str,
    limits: &ArchiveLimits,
) -> Result<Extracted, ArchiveError> {
    extract_tar_gz(gz, &s.dest, &RelativeDir::parse(sub).unwrap(), limits)
}

/// Every regular file under `dir`, relative path → content; fails on anything else.
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1) {
        let e = e.unwrap();
        let ft = e.file_type();
        assert!(!ft.is_symlink(), "a link was created: {:?}", e.path());
        if ft.is_file() {
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            out.insert(rel, fs::read(e.path()).unwrap());
        }
    }
    out
}

/// After a rejection: the destination is gone and the scratch dir holds only the sentinel.
fn assert_clean(s: &Scratch) {
    assert!(!s.dest.exists(), "partial extraction left behind");
    let names: Vec<_> = fs::read_dir(&s.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["sentinel"]);
    assert_eq!(fs::read(s.root.join("sentinel")).unwrap(), b"untouched");
}

/// Extracts `gz` into a fresh scratch dir, which must fail and leave the dir as it was.
fn refused(gz: &[u8], sub: &str, limits: &ArchiveLimits) -> ArchiveError {
    let s = scratch();
    let err = extract(&s, gz, sub, limits).unwrap_err();
    assert_clean(&s);
    err
}

fn rejected(entries: &[Entry]) -> ArchiveError {
    let err = refused(&tar_gz(entries), ".", &roomy());
    assert!(err.is_rejection(), "{err}");
    err
}

#[test]
fn extracts_the_selected_subdirectory_of_a_codeload_archive() {
    let s = scratch();
    let gz = codeload(
        TOP,
        &[
            ("README.md", b"top"),
            ("suites/parser/tests/a.rs", b"fn a() {}"),
            ("suites/parser/Cargo.toml", b"[package]"),
            ("suites/other/b.rs", b"no"),
        ],
    );
    let stats = extract(&s, &gz, "suites/parser", &roomy()).unwrap();
    assert_eq!(stats.files, 2);
    assert_eq!(stats.bytes, 9 + 9);
    let got = files_under(&s.dest);
    let want: BTreeMap<String, Vec<u8>> = [
        ("Cargo.toml".to_owned(), b"[package]".to_vec()),
        ("tests/a.rs".to_owned(), b"fn a() {}".to_vec()),
    ]
    .into();
    assert_eq!(got, want);
    assert_eq!(
        dir_digest(&s.dest),
        tree_digest(&[("Cargo.toml", b"[package]"), ("tests/a.rs", b"fn a() {}")])
    );
}

#[test]
fn keeps_only_the_executable_bit() {
    use std::os::unix::fs::PermissionsExt;
    let s = scratch();
    let gz = tar_gz(&[
        dir("t/"),
        Entry::File {
            path: "t/run.sh".into(),
            data: b"#!/bin/sh".to_vec(),
            mode: 0o4775,
        },
        Entry::File {
            path: "t/data".into(),
            data: vec![],
            mode: 0o666,
        },
    ]);
    extract(&s, &gz, ".", &roomy()).unwrap();
    let mode = |p: &str| fs::metadata(s.dest.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("run.sh"), 0o755);
    assert_eq!(mode("data"), 0o644);
}

#[test]
fn long_gnu_names_are_supported() {
    let long = format!("t/{}/{}.rs", "d".repeat(90), "f".repeat(60));
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(2);
    h.set_mode(0o644);
    b.append_data(&mut h, &long, &b"ok"[..]).unwrap();
    let gz = gzip(&b.into_inner().unwrap());
    let s = scratch();
    extract(&s, &gz, ".", &roomy()).unwrap();
    assert_eq!(
        fs::read(s.dest.join(long.strip_prefix("t/").unwrap())).unwrap(),
        b"ok"
    );
}

#[test]
fn rejects_path_traversal() {
    let err = rejected(&[dir("t/"), file("t/../x", b"evil")]);
    assert!(matches!(err, ArchiveError::UnsafePath(_)), "{err}");
    let err = rejected(&[dir("t/"), file("t/a/../../x", b"evil")]);
    assert!(matches!(err, ArchiveError::UnsafePath(_)), "{err}");
}

#[test]
fn rejects_traversal_hidden_in_a_pax_path() {
    let err = rejected(&[
        dir("t/"),
        Entry::PaxFile {
            name: "t/innocent".into(),
            pax_path: "t/../../escape".into(),
            data: b"evil".to_vec(),
        },
    ]);
    assert!(matches!(err, ArchiveError::UnsafePath(_)), "{err}");
}

#[test]
fn rejects_absolute_paths() {
    let err = rejected(&[file("/tmp/x", b"evil")]);
    assert!(matches!(err, ArchiveError::AbsolutePath(_)), "{err}");
}

#[test]
fn rejects_links_and_special_files() {
    let err = rejected(&[
        dir("t/"),
        Entry::Symlink {
            path: "t/l".into(),
            target: "/etc".into(),
        },
    ]);
    assert!(matches!(err, ArchiveError::Link(_)), "{err}");
    let err = rejected(&[
        dir("t/"),
        file("t/a", b"x"),
        Entry::HardLink {
            path: "t/h".into(),
            target: "t/a".into(),
        },
    ]);
    assert!(matches!(err, ArchiveError::Link(_)), "{err}");
    let err = rejected(&[dir("t/"), Entry::Fifo { path: "t/p".into() }]);
    assert!(matches!(err, ArchiveError::SpecialFile(_)), "{err}");
}

#[test]
fn rejects_unnormalized_names() {
    for bad in ["t/./a", "t//a", "t/a\\b", "./t/a", "t/a/"] {
        let err = rejected(&[dir("t/"), file(bad, b"x")]);
        assert!(matches!(err, ArchiveError::UnsafePath(_)), "{bad}: {err}");
    }
    let err = rejected(&[
        dir("t/"),
        Entry::RawName {
            name: b"t/\xff\xfe".to_vec(),
            data: vec![],
        },
    ]);
    assert!(matches!(err, ArchiveError::NonUtf8), "{err}");
}

#[test]
fn rejects_duplicates_and_file_directory_conflicts() {
    let err = rejected(&[dir("t/"), file("t/a", b"1"), file("t/a", b"2")]);
    assert!(matches!(err, ArchiveError::Duplicate(_)), "{err}");
    let err = rejected(&[dir("t/"), dir("t/d/"), dir("t/d/")]);
    assert!(matches!(err, ArchiveError::Duplicate(_)), "{err}");
    let err = rejected(&[dir("t/"), file("t/a", b"1"), file("t/a/b", b"2")]);
    assert!(matches!(err, ArchiveError::Conflict(_)), "{err}");
}

#[test]
fn rejects_anything_but_one_top_level_folder() {
    let err = rejected(&[dir("t/"), file("t/a", b"1"), dir("u/"), file("u/b", b"2")]);
    assert!(matches!(err, ArchiveError::MultipleTopLevel), "{err}");
    let err = rejected(&[file("loose", b"1")]);
    assert!(matches!(err, ArchiveError::NotInTopLevelFolder(_)), "{err}");
    let err = rejected(&[Entry::GlobalHeader {
        comment: "only a header".into(),
    }]);
    assert!(matches!(err, ArchiveError::Empty), "{err}");
}

#[test]
fn subdirectory_must_exist_and_be_a_directory() {
    let gz = codeload(TOP, &[("a/b", b"x")]);
    let err = refused(&gz, "missing", &roomy());
    assert!(matches!(err, ArchiveError::SubdirectoryMissing(_)), "{err}");
    let err = refused(&gz, "a/b", &roomy());
    assert!(
        matches!(err, ArchiveError::SubdirectoryNotDirectory(_)),
        "{err}"
    );
}

#[test]
fn never_extracts_over_an_existing_destination() {
    let s = scratch();
    fs::create_dir(&s.dest).unwrap();
    fs::write(s.dest.join("keep"), b"mine").unwrap();
    let err = extract(&s, &codeload(TOP, &[("keep", b"theirs")]), ".", &roomy()).unwrap_err();
    assert!(matches!(err, ArchiveError::DestinationExists(_)), "{err}");
    assert_eq!(fs::read(s.dest.join("keep")).unwrap(), b"mine");
}

#[test]
fn tar_bomb_over_the_uncompressed_cap_is_rejected() {
    let zeros = vec![0u8; 1 << 20];
    let tar = tar_bytes(&[dir("t/"), file("t/zeros", &zeros)]);
    let gz = gzip(&tar);
    assert!(gz.len() < 16 << 10, "the bomb compresses well");
    let s = scratch();
    let limits = ArchiveLimits {
        max_uncompressed_bytes: tar.len() as u64,
        ..roomy()
    };
    extract(&s, &gz, ".", &limits).unwrap();
    let limits = ArchiveLimits {
        max_uncompressed_bytes: (1 << 20) - 1,
        ..roomy()
    };
    let err = refused(&gz, ".", &limits);
    assert!(
        matches!(err, ArchiveError::UncompressedTooLarge { .. }),
        "{err}"
    );
}

#[test]
fn uncompressed_cap_counts_entries_outside_the_subdirectory_too() {
    let zeros = vec![0u8; 1 << 20];
    let gz = tar_gz(&[
        dir("t/"),
        file("t/elsewhere/zeros", &zeros),
        file("t/sub/a", b"x"),
    ]);
    let limits = ArchiveLimits {
        max_uncompressed_bytes: 512 << 10,
        ..roomy()
    };
    let err = refused(&gz, "sub", &limits);
    assert!(
        matches!(err, ArchiveError::UncompressedTooLarge { .. }),
        "{err}"
    );
}

#[test]
fn compressed_cap_is_enforced_while_reading() {
    // Incompressible content, so the compressed size tracks the content size.
    let noise: Vec<u8> = (0..(256u32 << 10))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let gz = tar_gz(&[dir("t/"), file("t/noise", &noise)]);
    let s = scratch();
    let limits = ArchiveLimits {
        max_compressed_bytes: gz.len() as u64,
        ..roomy()
    };
    extract(&s, &gz, ".", &limits).unwrap();
    let limits = ArchiveLimits {
        max_compressed_bytes: gz.len() as u64 / 2,
        ..roomy()
    };
    let err = refused(&gz, ".", &limits);
    assert!(
        matches!(err, ArchiveError::CompressedTooLarge { .. }),
        "{err}"
    );
}

#[test]
fn entry_cap_counts_every_entry() {
    let entries = [
        Entry::GlobalHeader {
            comment: "c".into(),
        },
        dir("t/"),
        file("t/a", b"1"),
        file("t/b", b"2"),
    ];
    let gz = tar_gz(&entries);
    let s = scratch();
    let at = ArchiveLimits {
        max_entries: 4,
        ..roomy()
    };
    extract(&s, &gz, ".", &at).unwrap();
    let under = ArchiveLimits {
        max_entries: 3,
        ..roomy()
    };
    let err = refused(&gz, ".", &under);
    assert!(
        matches!(err, ArchiveError::TooManyEntries { limit: 3 }),
        "{err}"
    );
}

#[test]
fn manifest_tree_caps_apply_to_the_selected_subtree() {
    let gz = codeload(
        TOP,
        &[
            ("big/outside", &[7u8; 5000]),
            ("sub/a", b"12345"),
            ("sub/b", b"67890"),
        ],
    );
    let ok = ArchiveLimits {
        max_tree_bytes: 10,
        max_tree_files: 2,
        ..roomy()
    };
    let s = scratch();
    let stats = extract(&s, &gz, "sub", &ok).unwrap();
    assert_eq!((stats.files, stats.bytes), (2, 10));

    let few_bytes = ArchiveLimits {
        max_tree_bytes: 9,
        ..ok
    };
    let err = refused(&gz, "sub", &few_bytes);
    assert!(
        matches!(err, ArchiveError::TreeTooLarge { limit: 9 }),
        "{err}"
    );

    let few_files = ArchiveLimits {
        max_tree_files: 1,
        ..ok
    };
    let err = refused(&gz, "sub", &few_files);
    assert!(
        matches!(err, ArchiveError::TooManyFiles { limit: 1 }),
        "{err}"
    );
}

#[test]
fn corrupt_gzip_is_rejected_and_cleaned() {
    let mut gz = codeload(TOP, &[("a", b"x")]);
    let mid = gz.len() / 2;
    gz.truncate(mid);
    let err = refused(&gz, ".", &roomy());
    assert!(matches!(err, ArchiveError::Read(_)), "{err}");
}

// ---- property test ----

#[derive(Clone, Debug)]
enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink,
    HardLink,
}

/// Mostly well-formed paths under one top-level folder, with a minority of every kind of
/// defect, so both accepted and refused archives are common.
fn arb_path(min_rest: usize) -> impl Strategy<Value = String> {
    let top = prop_oneof![40 => Just("t"), 1 => Just("u"), 1 => Just(".."), 1 => Just("")];
    let component = prop_oneof![
        8 => Just("a"),
        8 => Just("b"),
        8 => Just("c"),
        8 => Just("d"),
        1 => Just(".."),
        1 => Just("."),
        1 => Just(""),
        1 => Just("a\\b"),
    ];
    (
        prop::bool::weighted(0.02),
        top,
        prop::collection::vec(component, min_rest..3),
    )
        .prop_map(|(abs, top, rest)| {
            let mut p = top.to_owned();
            for c in rest {
                p.push('/');
                p.push_str(c);
            }
            if abs { format!("/{p}") } else { p }
        })
}

/// Mostly well-formed entries under one top-level folder, with a minority of every kind of
/// defect, so both accepted and refused archives are common.
fn arb_entry() -> impl Strategy<Value = (String, Kind)> {
    prop_oneof![
        12 => (arb_path(1), prop::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(p, d)| (p, Kind::File(d))),
        1 => arb_path(0).prop_map(|p| (p, Kind::File(b"top".to_vec()))),
        6 => arb_path(0).prop_map(|p| (p, Kind::Dir)),
        1 => arb_path(1).prop_map(|p| (p, Kind::Symlink)),
        1 => arb_path(1).prop_map(|p| (p, Kind::HardLink)),
    ]
}

fn to_entry((path, kind): &(String, Kind)) -> Entry {
    match kind {
        Kind::File(data) => file(path, data),
        Kind::Dir => dir(&format!("{path}/")),
        Kind::Symlink => Entry::Symlink {
            path: path.clone(),
            target: "../../etc".into(),
        },
        Kind::HardLink => Entry::HardLink {
            path: path.clone(),
            target: "t/a".into(),
        },
    }
}

/// An independent statement of the rules: the files a correct extractor writes, or `None`
/// when the archive must be refused.
fn model(entries: &[(String, Kind)]) -> Option<BTreeMap<String, Vec<u8>>> {
    let mut top: Option<&str> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut files = BTreeMap::new();
    for (path, kind) in entries {
        if matches!(kind, Kind::Symlink | Kind::HardLink) {
            return None;
        }
        if path.starts_with('/') {
            return None;
        }
        let parts: Vec<&str> = path.split('/').collect();
        if parts
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('\\'))
        {
            return None;
        }
        let first = parts[0];
        if top.is_some_and(|t| t != first) {
            return None;
        }
        top = Some(first);
        let rest = parts[1..].join("/");
        if rest.is_empty() && matches!(kind, Kind::File(_)) {
            return None;
        }
        if seen.contains(&rest) {
            return None;
        }
        seen.push(rest.clone());
        if let Kind::File(data) = kind {
            files.insert(rest, data.clone());
        }
    }
    top?;
    for f in files.keys() {
        if seen.iter().any(|p| p.starts_with(&format!("{f}/"))) {
            return None;
        }
    }
    Some(files)
}

/// Guards the property test against vacuity: its generator must produce plenty of archives
/// on both sides of the rules.
#[test]
fn the_entry_generator_produces_both_valid_and_invalid_archives() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(arb_entry(), 0..7);
    let valid = (0..1000)
        .filter(|_| model(&strategy.new_tree(&mut runner).unwrap().current()).is_some())
        .count();
    assert!(
        (150..=850).contains(&valid),
        "{valid} of 1000 generated archives are valid"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_entry_lists_extract_exactly_the_allowed_files_or_leave_nothing(
        entries in prop::collection::vec(arb_entry(), 0..7)
    ) {

        let s = scratch();
        let tar_entries: Vec<Entry> = entries.iter().map(to_entry).collect();
        let result = extract(&s, &tar_gz(&tar_entries), ".", &roomy());
        match model(&entries) {
            Some(expected) => {
                prop_assert!(result.is_ok(), "refused a valid archive: {:?}", result);
                prop_assert_eq!(files_under(&s.dest), expected);
                // Nothing beside the destination.
                let mut names: Vec<String> = fs::read_dir(&s.root)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect();
                names.sort();
                prop_assert_eq!(names, vec!["out".to_owned(), "sentinel".to_owned()]);
            }
            None => {
                prop_assert!(result.is_err(), "accepted an invalid archive");
                assert_clean(&s);
            }
        }
    }
}

/// Peak resident memory of this process so far (nextest runs each test in its own process).
fn peak_rss_bytes() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// A tar.gz whose first entry is an extension header of `kind` announcing `size` bytes of
/// zeros, followed by a plain `t/` folder and file. Built in chunks: the test never holds the
/// header's body.
fn huge_extension_header(kind: tar::EntryType, size: u64) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut h = tar::Header::new_ustar();
    h.set_path("././@LongLink").unwrap();
    h.set_entry_type(kind);
    write_zeros_entry(&mut gz, h, size);
    let pad = (512 - size % 512) % 512;
    gz.write_all(&vec![0u8; pad as usize]).unwrap();
    let rest = tar_bytes(&[dir("t/"), file("t/a", b"a")]);
    gz.write_all(&rest).unwrap();
    gz.finish().unwrap()
}

/// Extracts an archive whose extension header announces 100 MiB under the production source
/// caps, and checks it is refused for the header's size without buffering it.
fn assert_huge_header_refused(kind: tar::EntryType) {
    let gz = huge_extension_header(kind, 100 << 20);
    assert!(gz.len() < 1 << 20, "zeros compress well: {}", gz.len());
    let limits = ArchiveLimits {
        max_compressed_bytes: worker_store::archive::SOURCE_MAX_COMPRESSED,
        max_uncompressed_bytes: worker_store::archive::SOURCE_MAX_UNCOMPRESSED,
        ..roomy()
    };
    let s = scratch();
    let before = peak_rss_bytes();
    let result = extract(&s, &gz, ".", &limits);
    let grown = peak_rss_bytes().saturating_sub(before);
    let shown: String = format!("{result:?}").chars().take(300).collect();
    eprintln!("{kind:?}: {shown}; peak rss grew by {} KiB", grown >> 10);
    assert!(
        grown < 16 << 20,
        "a {kind:?} header was buffered: peak rss grew by {} MiB",
        grown >> 20
    );
    let err = result.unwrap_err();
    assert!(err.is_rejection(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("extension header") && text.contains("65536"),
        "not refused for the header's size: {text}"
    );
    assert_clean(&s);
}

#[test]
fn a_100_mib_gnu_long_name_header_is_refused_without_buffering_it() {
    assert_huge_header_refused(tar::EntryType::GNULongName);
}

#[test]
fn a_100_mib_gnu_long_link_header_is_refused_without_buffering_it() {
    assert_huge_header_refused(tar::EntryType::GNULongLink);
}

#[test]
fn a_100_mib_pax_extended_header_is_refused_without_buffering_it() {
    assert_huge_header_refused(tar::EntryType::XHeader);
}

#[test]
fn a_100_mib_pax_global_header_is_refused_without_buffering_it() {
    assert_huge_header_refused(tar::EntryType::XGlobalHeader);
}

#[test]
fn a_pax_path_names_the_file() {
    let s = scratch();
    let long = format!("t/{}/{}.rs", "d".repeat(120), "f".repeat(80));
    let gz = tar_gz(&[
        dir("t/"),
        Entry::PaxFile {
            name: "t/short".into(),
            pax_path: long.clone(),
            data: b"pax".to_vec(),
        },
    ]);
    extract(&s, &gz, ".", &roomy()).unwrap();
    let got = files_under(&s.dest);
    assert_eq!(got.len(), 1);
    assert_eq!(got[long.strip_prefix("t/").unwrap()], b"pax");
}

#[test]
fn a_pax_size_that_disagrees_with_the_header_is_refused() {
    // Parsers that honour the pax size and those that read the header's would see different
    // files in the same archive.
    let mut b = tar::Builder::new(Vec::new());
    let record = b"16 size=1048576\n";
    let mut d = tar::Header::new_ustar();
    d.set_path("t/").unwrap();
    d.set_entry_type(tar::EntryType::Directory);
    d.set_size(0);
    d.set_cksum();
    b.append(&d, &[][..]).unwrap();
    let mut x = tar::Header::new_ustar();
    x.set_path("PaxHeaders/a").unwrap();
    x.set_entry_type(tar::EntryType::XHeader);
    x.set_size(record.len() as u64);
    x.set_cksum();
    b.append(&x, &record[..]).unwrap();
    let mut f = tar::Header::new_ustar();
    f.set_path("t/a").unwrap();
    f.set_size(1);
    f.set_mode(0o644);
    f.set_cksum();
    b.append(&f, &b"a"[..]).unwrap();
    let gz = gzip(&b.into_inner().unwrap());
    let err = refused(&gz, ".", &roomy());
    assert!(err.is_rejection(), "{err}");
}

/// Issue 21 item 11: an entry the local filesystem cannot hold (a 300-byte name, over
/// NAME_MAX 255; a path over PATH_MAX 4096) failed while writing, as a local I/O error
/// (`extract_failed`, retried every cycle), instead of being refused by rule like a link.
#[test]
fn entries_the_filesystem_cannot_hold_are_refused_by_rule_not_as_a_local_failure() {
    let long_name = format!("t/{}", "n".repeat(300));
    let long_path = format!("t/{}", vec!["d".repeat(200); 21].join("/"));
    for path in [long_name, long_path] {
        let err = rejected(&[
            dir("t/"),
            Entry::PaxFile {
                name: "t/short".into(),
                pax_path: path.clone(),
                data: b"x".to_vec(),
            },
        ]);
        assert!(err.is_permanent_rejection(), "{} bytes: {err}", path.len());
        assert!(
            err.to_string().contains("cannot be written"),
            "{} bytes: {err}",
            path.len()
        );
    }
    // The longest name the filesystem holds still extracts.
    let s = scratch();
    let longest = format!("t/{}", "n".repeat(255));
    let gz = tar_gz(&[
        dir("t/"),
        Entry::PaxFile {
            name: "t/short".into(),
            pax_path: longest.clone(),
            data: b"ok".to_vec(),
        },
    ]);
    extract(&s, &gz, ".", &roomy()).unwrap();
    assert_eq!(files_under(&s.dest)[&longest[2..]], b"ok");
}
