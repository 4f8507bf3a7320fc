#!/usr/bin/env bash
# Test the Python client against live `orq serve` processes (started by the tests' fixtures on
# the embedded store). Installs the package (`pip install ./clients/python[test]`, as a user
# would) into target/python-client-venv on first use. ORQ_BIN: the orq binary (default: the
# repository's target/debug/orq, built by test.sh).
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
venv=$repo/target/python-client-venv
if [ ! -x "$venv/bin/pytest" ] || [ pyproject.toml -nt "$venv/.installed" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check ".[test]"
  touch "$venv/.installed"
else
  # The sources may have changed since: reinstall the package itself only (no dependencies).
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall .
fi
export ORQ_BIN=${ORQ_BIN:-$repo/target/debug/orq}
[ -x "$ORQ_BIN" ] || { echo "$ORQ_BIN is missing: cargo build --bin orq first" >&2; exit 1; }
# The package is typed (py.typed): its annotations must hold.
"$venv/bin/mypy" --no-incremental src/orq
# From a scratch directory, so the tests import the installed package, not src/.
cd tests && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
