#!/usr/bin/env bash
# One entry point for a fresh clone: `./dev.sh demo` runs gen-tui on its embedded default,
# `./dev.sh test` runs the checks, `./dev.sh quick` the same checks and the quick tier of
# tests (`pytest -m quick`: every unit test and one real-process test of each subsystem, a
# few minutes where the whole suite takes 20 to 35), `./dev.sh docs` builds the docs site
# into site/. Each creates ./.venv on first use, and installs into it only when
# pyproject.toml changed since the last install (an editable install follows the sources by
# itself), so a second launch starts at once. Each installs only its own extra: the docs'
# never slows the tests.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

venv() {
    if [ ! -x .venv/bin/python ]; then
        "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
            echo "dev.sh: gen-tui needs Python 3.11 or newer (set PYTHON=python3.11)" >&2
            exit 1
        }
        echo "dev.sh: creating .venv (first run only)" >&2
        "$PYTHON" -m venv .venv
    fi
}

# install EXTRAS: `pip install -e .[EXTRAS]` unless this very pyproject.toml was installed
# with these extras already (a stamp in .venv records which).
install() {
    local want stamp=.venv/.gen-tui-installed
    want="$1 $(cksum < pyproject.toml)"
    if [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
        return 0
    fi
    # The first install of these extras downloads their dependencies (textual, aiohttp,
    # tokenizers, ...; the tests' mypy and ruff): minutes on a slow link, so pip's own lines
    # and progress bars show what it does. Later ones (pyproject.toml changed) stay quiet.
    local quiet=(--quiet)
    if ! grep -q "^$1 [0-9]" "$stamp" 2>/dev/null; then
        echo "dev.sh: first install of gen-tui${1:+[$1]} into .venv: pip downloads its" \
            "dependencies, which may take a few minutes (later launches start at once)" >&2
        quiet=()
    else
        echo "dev.sh: installing gen-tui${1:+[$1]} into .venv (pyproject.toml changed)" >&2
    fi
    .venv/bin/python -m pip install "${quiet[@]}" --disable-pip-version-check -e ".${1:+[$1]}"
    echo "$want" >> "$stamp"
}

# mypy_links: the three folders as the package gen_tui, in .venv/mypy-path, for mypy
# ([tool.mypy] in pyproject.toml): it cannot follow the editable install's import hook.
mypy_links() {
    local folder links=.venv/mypy-path/gen_tui
    mkdir -p "$links"
    for folder in app widgets backends; do
        ln -sfn "../../../$folder" "$links/$folder"
    done
}

case "${1:-}" in
    demo)
        venv
        install ""
        shift
        exec .venv/bin/gen-tui --demo "$@"
        ;;
    test | quick)
        venv
        install test
        .venv/bin/ruff check .
        .venv/bin/ruff format --check .
        .venv/bin/lint-imports
        mypy_links
        # Its paths as the files' own (app/tui.py:12), not through the links.
        .venv/bin/mypy | sed 's#^\.venv/mypy-path/gen_tui/##'
        tier=()
        [ "$1" = quick ] && tier=(-m quick)
        shift
        # Two workers (pytest-xdist): most tests wait on processes, sockets and clocks, so a
        # second one on the same two cores nearly halves the wall time. Each test's group
        # (tests/conftest.py) keeps a file, a shared server or the Unix accounts on one
        # worker. GEN_TUI_TEST_WORKERS=0 runs in one process.
        exec .venv/bin/python -m pytest -n "${GEN_TUI_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder \
            "${tier[@]}" "$@"
        ;;
    docs)
        venv
        install docs
        # --strict: a broken link or anchor, a missing page or include fails the build (not
        # with --quiet: mkdocs 1.6 then counts no warning, and a broken link passed).
        # NO_MKDOCS_2_WARNING: Material's banner about its end of life, not about our pages.
        NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir site
        echo "dev.sh: docs built in site/ (open site/index.html)" >&2
        ;;
    *)
        echo "usage: ./dev.sh demo | ./dev.sh test [pytest args] | ./dev.sh quick [pytest args] | ./dev.sh docs" >&2
        exit 2
        ;;
esac
