#!/usr/bin/env bash
# Set up everything pgsteady needs on a Debian machine; idempotent and quick when done.
#   1. PostgreSQL and PgBouncer from Debian's packages, when missing (never started as services)
#   2. .venv with pgsteady installed editable, with the dev extras
set -euo pipefail
cd "$(dirname "$0")/.."

have_postgres() { ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null; }
have_pgbouncer() { command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ]; }

if ! have_postgres || ! have_pgbouncer; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing postgresql and pgbouncer from Debian's packages" >&2
    # The lab starts its own servers; keep the packages from starting system-wide ones.
    policy=/usr/sbin/policy-rc.d
    made_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
        made_policy=1
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        postgresql pgbouncer >/dev/null
    [ -z "$made_policy" ] || $sudo rm -f "$policy"
fi

stamp=.venv/.pgsteady-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ ! -x .venv/bin/pgsteady ]; then
    echo "setup: creating .venv and installing pgsteady[dev]" >&2
    python3 -m venv .venv
    log=.venv/pip-install.log
    if ! { .venv/bin/python -m pip install -q --upgrade pip &&
           .venv/bin/python -m pip install -q -e '.[dev]'; } >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "setup: pip install failed; full log in $log" >&2
        exit 1
    fi
    .venv/bin/python -c 'import pgsteady, psycopg, psycopg_pool, pglast, rich, matplotlib'
    touch "$stamp"
fi
