//! Names an image may have instead of a command's missing `argv[0]`.
//!
//! The live platform's own manifests run `python`; Debian's images (and this repository's) have
//! only `python3`, so the run ends `start_failed` with nothing to go on. When a well-known
//! counterpart of the missing name is on the image's `PATH`, the start-failed detail names it.
//! Only a hint: the manifest is committed as written, and nothing is ever run in its place.

/// Well-known other names of a bare command name, most likely first.
pub(super) fn alternatives(argv0: &str) -> &'static [&'static str] {
    match argv0 {
        "python" => &["python3", "python2"],
        "pip" => &["pip3"],
        "python3" => &["python"],
        "node" => &["nodejs"],
        "nodejs" => &["node"],
        "cc" => &["gcc", "clang"],
        _ => &[],
    }
}

/// The start-failed detail when `argv0` is missing and `found` (name, path) is on the PATH.
pub(super) fn hint(argv0: &str, found: Option<(&str, &str)>) -> String {
    match found {
        Some((name, path)) => format!(
            "executable {argv0} not found in the image; {name} is on its PATH ({path}): name it \
             in the manifest's command"
        ),
        None => format!("executable {argv0} not found in the image"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_points_at_python3_and_unknown_names_at_nothing() {
        assert_eq!(alternatives("python")[0], "python3");
        assert!(alternatives("cargo").is_empty());
        assert_eq!(
            hint("python", Some(("python3", "/usr/bin/python3"))),
            "executable python not found in the image; python3 is on its PATH \
             (/usr/bin/python3): name it in the manifest's command"
        );
        assert_eq!(hint("x", None), "executable x not found in the image");
    }
}
