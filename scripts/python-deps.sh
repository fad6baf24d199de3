#!/usr/bin/env bash
# Python packages the Rust tests use as independent implementations (today: the in-toto
# project's own `in-toto-attestation` bindings, which validate the worker's in-toto
# statements). Installed from PyPI into .work/py-venv, pinned, and only when missing; the
# tests that need them fail (never skip) when this has not run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IN_TOTO_ATTESTATION_VERSION=0.9.3
PROTOBUF_VERSION=7.36.2
VENV=.work/py-venv

installed() {
  "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if all(version(n) == v for n, v in (a.split("==") for a in sys.argv[1:])) else 1)
PY
}

want=("in-toto-attestation==$IN_TOTO_ATTESTATION_VERSION" "protobuf==$PROTOBUF_VERSION")
if ! installed "${want[@]}"; then
  echo "installing ${want[*]} into $VENV" >&2
  mkdir -p .work
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${want[@]}"
fi
installed "${want[@]}" || { echo "error: ${want[*]} did not install into $VENV" >&2; exit 1; }
