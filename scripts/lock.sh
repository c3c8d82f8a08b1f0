#!/usr/bin/env bash
# Regenerates the lock files of the Python environments the tests build (tests/locks/NAME.txt from NAME.in): every
# package, transitive ones included, pinned to one version with the sha256 of each of its files on PyPI. The tests
# install a lock with `pip install --require-hashes`, so pip refuses a package the lock does not name.
#
# usage: scripts/lock.sh [NAME...]        (default: every tests/locks/*.in)
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=${TMPDIR:-/tmp}/phantom-lock-tools
if [ ! -x "$TOOLS/bin/pip-compile" ]; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "pip-tools==7.7.0"
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd tests/locks && ls *.in | sed 's/\.in$//'))
# NAME-nodeps: packages installed with --no-deps (their declared dependencies are not what the tests use): each pin
# of NAME-nodeps.in with the sha256 of the file pip downloads for it.
nodeps() {
  local dir; dir=$(mktemp -d)
  {
    echo "# Made by scripts/lock.sh from $1.in: installed with pip install --no-deps --require-hashes."
    grep -v '^ *#' "tests/locks/$1.in" | grep -v '^ *$' | while read -r pin; do
      "$TOOLS/bin/pip" download --quiet --no-deps --dest "$dir/$pin" "$pin" >/dev/null
      echo "$pin \\"
      for f in "$dir/$pin"/*; do echo "    --hash=sha256:$(sha256sum "$f" | cut -d' ' -f1)"; done
    done
  } > "tests/locks/$1.txt"
  rm -rf "$dir"
}
for n in "${names[@]}"; do
  case "$n" in
    *-nodeps) nodeps "$n" ;;
    *) (cd tests/locks && "$TOOLS/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
          --no-emit-index-url --no-emit-find-links --output-file "$n.txt" "$n.in") ;;
  esac
  echo "tests/locks/$n.txt"
done
