#!/usr/bin/env bash
# One entry point for a fresh clone: `./dev.sh demo` runs gen-tui on its embedded default,
# `./dev.sh test` runs the checks. Both create ./.venv on first use.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

venv() {
    if [ ! -x .venv/bin/python ]; then
        "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
            echo "dev.sh: gen-tui needs Python 3.11 or newer (set PYTHON=python3.11)" >&2
            exit 1
        }
        "$PYTHON" -m venv .venv
    fi
}

case "${1:-}" in
    demo)
        venv
        .venv/bin/python -m pip install --quiet --disable-pip-version-check .
        shift
        exec .venv/bin/gen-tui --demo "$@"
        ;;
    test)
        venv
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
        .venv/bin/ruff check .
        .venv/bin/ruff format --check .
        shift
        exec .venv/bin/python -m pytest "$@"
        ;;
    *)
        echo "usage: ./dev.sh demo | ./dev.sh test [pytest args]" >&2
        exit 2
        ;;
esac
