#!/usr/bin/env python3
"""Fails when the repository's documents point at something that does not exist.

- every relative link in a tracked Markdown file (`[text](path#anchor)`) names an existing file,
  and its anchor, when it points into a Markdown file, names a heading there (GitHub's slugs);
- every "PROTOCOL §N" / "DESIGN §N" (also "PROTOCOL.md section N", "DESIGN.md §N") cited in a
  tracked file names a numbered section of docs/protocol.md / docs/design.md;
- every backticked repository path (`crates/worker/src/main.rs`, `docs/json.md:12`, `scripts/`)
  in a tracked file names a file or directory that exists. A path is a backticked token without
  spaces that starts with one of REPO_DIRS; a trailing `:line`, `#anchor` or `::item` is dropped
  and tokens with a placeholder (`*`, `<n>`, `{a,b}`, `$VAR`, `...`) are not checked. NOT_HERE
  lists the paths the documents name in other trees (the reference pipeline's repository, a
  solver's files in the examples).
- every commit id a tracked Markdown file cites (a word of exactly 7 hex digits with both a digit
  and a letter, or a backticked one of 7 digits, not the `…`-elided end of a longer digest)
  names a commit of this repository's
  history (`git cat-file -e ID^{commit}`): a figure cited "at abc1234" must be reproducible
  from main, and commits lost with a machine (squashed into another) are not. NOT_COMMITS
  lists the words of that shape that are no commit. Skipped, with a note, in a shallow clone,
  where older commits are absent by design.

Prints one line per problem and closes with "N passed, N failed" (files checked, files with a
problem). Offline: links to other sites are not fetched.

`scripts/check-docs.py --self-test` checks the checker: it writes a small repository with one
broken link, section citation, repository path and commit id each (and correct ones beside them)
and fails unless exactly the broken ones are reported. CI runs both (.ci/run).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_DIRS = ("crates/", "scripts/", "docs/", "deploy/", "manifests/", "fixtures/", "images/",
             ".github/", ".ci/", "tools/", "contracts/")
# Paths in other trees, named as such where they appear.
NOT_HERE = {
    # the reference deployment's repository (docs/operations.md, validate_candidate)
    "scripts/regression_verifier_pipeline.py",
    # files of a solver's tree in the examples of the rehearsal's checks (docs/authors.md, references.rs)
    "tools/check.py",
    "tools/check_card.py",
    "scripts/check-x.py",
    "scripts/check-hermes-integration.py",
}
# Words shaped like a short commit id that are something else.
NOT_COMMITS = {
    "ed25519",  # the signature scheme
}


def slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def sections(path):
    return {m.group(1) for m in re.finditer(r"^##+ (\d+)\.", path.read_text(encoding="utf-8"), re.M)}


link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
cite = re.compile(r"\b(PROTOCOL|DESIGN)(?:\.md)?(?: section | ?§ ?)(\d+)")
backticked = re.compile(r"`([^`\s]+)`")
placeholder = re.compile(r"[*<>{}$…]|\.\.\.")
short_id = re.compile(r"(?<![0-9A-Za-z_…])[0-9a-f]{7}(?![0-9A-Za-z_…])")


def cited_commits(text):
    """The words of text shaped like a short commit id (see the module's docs)."""
    words = [w for w in short_id.findall(text)
             if re.search(r"[0-9]", w) and re.search(r"[a-f]", w) and w not in NOT_COMMITS]
    # A bare number of 7 digits is usually a number; backticked, it is an id.
    return words + re.findall(r"`([0-9]{7})`", text)


def missing_commits(root, ids):
    """The ids among ids that name no commit of root's history; None in a shallow clone."""
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=root,
                             capture_output=True, text=True).stdout.strip()
    if shallow == "true":
        return None
    ids = sorted(set(ids))
    query = "".join("%s^{commit}\n" % i for i in ids)
    out = subprocess.run(["git", "cat-file", "--batch-check"], cwd=root, input=query,
                         capture_output=True, text=True).stdout.splitlines()
    return {i for i, line in zip(ids, out) if line.endswith(" missing") or " " not in line}


def repo_path(token):
    """The repository path a backticked token names, or None when it names none."""
    if not token.startswith(REPO_DIRS) or placeholder.search(token):
        return None
    path = re.sub(r"(:\d+(-\d+)?)+$", "", token).split("#")[0].split("::")[0]
    path = path.rstrip(".,;:)")
    return None if path in NOT_HERE else path


def check(root):
    """Prints each problem under root; returns (files checked, files with a problem)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.split()
    # New files count too (the checker runs before a commit as well as in CI).
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.split()
    files = sorted(set(tracked + untracked))
    numbered = {doc: sections(root / ("docs/%s.md" % doc.lower())) for doc in ("PROTOCOL", "DESIGN")}
    cited = {}
    for name in files:
        if name.endswith(".md") and (root / name).is_file():
            cited[name] = cited_commits((root / name).read_text(encoding="utf-8", errors="replace"))
    missing = missing_commits(root, [i for ids in cited.values() for i in ids])
    if missing is None:
        print("note: a shallow clone: cited commit ids are not checked")
        missing = set()
    problems = []
    checked = 0
    for name in files:
        bad = check_file(root, name, numbered)
        if bad is not None:
            bad += ["cites commit %s, which is not in this repository's history" % i
                    for i in sorted(set(cited.get(name, ())) & missing)]
        if bad is None:
            continue
        checked += 1
        for problem in bad:
            print("%s: %s" % (name, problem))
        if bad:
            problems.append(name)
    return checked, problems


def check_file(root, name, numbered):
    """The problems of one file, or None when the file is not one to check."""
    path = root / name
    if not path.is_file() or "node_modules" in name:
        return None
    if not name.endswith((".md", ".rs", ".sh", ".sol", ".py", ".yml", ".toml")):
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    bad = []
    for doc, number in cite.findall(text):
        if number not in numbered[doc]:
            bad.append("cites %s §%s, which docs/%s.md does not have" % (doc, number, doc.lower()))
    # This file's self-test names broken paths on purpose.
    for token in backticked.findall(text) if name != "scripts/check-docs.py" else []:
        target = repo_path(token)
        if target and not (root / target).exists():
            bad.append("names `%s`, which does not exist" % token)
    if name.endswith(".md"):
        body = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in link.findall(body):
            if re.match(r"^[a-z]+:", target) or target.startswith("#") and not target[1:]:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                bad.append("links to %s, which does not exist" % target)
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append("links to %s, which has no heading #%s" % (file_part or name, anchor))
    return bad


SELF_TEST_FILES = {
    "docs/protocol.md": "# Protocol\n\n## 1. Jobs\n",
    "docs/design.md": "# Design\n\n## 1. Goals\n",
    "crates/a/src/lib.rs": "//! PROTOCOL §1; see `docs/guide.md#usage` and `crates/a/src/lib.rs:2`.\n",
    "docs/guide.md": "# Guide\n\n## Usage\n\n[jobs](protocol.md#1-jobs), `crates/a/src/`, "
                     "`crates/*/tests`, `scripts/<name>.sh`, `tools/check.py`\n",
    "docs/broken.md": "[gone](missing.md) [no heading](guide.md#nowhere)\n\n"
                      "`crates/worker/src/gone.rs:12` and DESIGN §9\n\n"
                      "Measured at abcdef1 and at `1234567`.\n",
}
# Written after the files above are committed, citing that commit (%s: its short id).
SELF_TEST_HISTORY = ("docs/history.md", "Measured at `%s`, signed with ed25519; a digest "
                     "`70258bb8…f36d538`; 7 digits bare: 1234567.\n")
SELF_TEST_EXPECTED = [
    "docs/broken.md: cites DESIGN §9, which docs/design.md does not have",
    "docs/broken.md: names `crates/worker/src/gone.rs:12`, which does not exist",
    "docs/broken.md: links to missing.md, which does not exist",
    "docs/broken.md: links to guide.md, which has no heading #nowhere",
    "docs/broken.md: cites commit 1234567, which is not in this repository's history",
    "docs/broken.md: cites commit abcdef1, which is not in this repository's history",
    "5 passed, 1 failed",
]


def self_test():
    """Runs the checker on a small repository with known problems; True when it finds them all."""
    import contextlib
    import io
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
        for name, text in SELF_TEST_FILES.items():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_text(text, encoding="utf-8")
        git = ["git", "-c", "user.name=self-test", "-c", "user.email=self-test@invalid"]
        subprocess.run(git + ["add", "-A"], cwd=tree, check=True)
        subprocess.run(git + ["commit", "-qm", "self-test"], cwd=tree, check=True)
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=tree, check=True,
                              capture_output=True, text=True).stdout.strip()
        name, text = SELF_TEST_HISTORY
        (tree / name).write_text(text % head, encoding="utf-8")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            checked, problems = check(tree)
            print("%d passed, %d failed" % (checked - len(problems), len(problems)))
    got = out.getvalue().splitlines()
    for line in got:
        print(("ok      " if line in SELF_TEST_EXPECTED else "UNWANTED ") + line)
    for line in SELF_TEST_EXPECTED:
        if line not in got:
            print("MISSED   " + line)
    return sorted(got) == sorted(SELF_TEST_EXPECTED)


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    checked, problems = check(Path(__file__).resolve().parent.parent)
    print("%d passed, %d failed" % (checked - len(problems), len(problems)))
    sys.exit(1 if problems else 0)
