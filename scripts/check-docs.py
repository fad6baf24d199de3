#!/usr/bin/env python3
"""Fails when the repository's documents point at something that does not exist.

- every relative link in a tracked Markdown file (`[text](path#anchor)`) names an existing file,
  and its anchor, when it points into a Markdown file, names a heading there (GitHub's slugs);
- every "PROTOCOL §N" / "DESIGN §N" (also "PROTOCOL.md section N", "DESIGN.md §N") cited in a
  tracked file names a numbered section of docs/protocol.md / docs/design.md.

Prints one line per problem and closes with "N passed, N failed" (files checked, files with a
problem). Offline: links to other sites are not fetched.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                         check=True).stdout.split()
# New files count too (the checker runs before a commit as well as in CI).
untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, text=True, check=True).stdout.split()
files = sorted(set(tracked + untracked))


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


numbered = {"PROTOCOL": sections(root / "docs/protocol.md"), "DESIGN": sections(root / "docs/design.md")}
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
cite = re.compile(r"\b(PROTOCOL|DESIGN)(?:\.md)?(?: section | ?§ ?)(\d+)")

problems = []
checked = 0
for name in files:
    path = root / name
    if not path.is_file() or "node_modules" in name:
        continue
    if not (name.endswith(".md") or name.endswith((".rs", ".sh", ".sol", ".py", ".yml", ".toml"))):
        continue
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        continue
    checked += 1
    bad = []
    for doc, number in cite.findall(text):
        if number not in numbered[doc]:
            bad.append("cites %s §%s, which docs/%s.md does not have" % (doc, number, doc.lower()))
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
    for problem in bad:
        print("%s: %s" % (name, problem))
    if bad:
        problems.append(name)

print("%d passed, %d failed" % (checked - len(problems), len(problems)))
sys.exit(1 if problems else 0)
