#!/usr/bin/env bash
# Installs the system packages Sluice's `make standalone` and `make test` need, when missing.
#
# Debian 12 and Ubuntu 24.04 (apt-get); as root, or through sudo. It checks each need and
# installs only what is missing, saying why; with everything there it prints nothing and uses
# no network. It starts no service and creates no database cluster: the tests and the
# standalone start their own Redis (and the tests their own PostgreSQL) from the binaries.
#
#   scripts/install-system-packages.sh            # what is missing, installed
#   PYTHON=python3.12 scripts/install-system-packages.sh
set -euo pipefail

ME="install-system-packages"
PYTHON=${PYTHON:-python3}
JDBC_JAR=/usr/share/java/postgresql.jar

fail() { echo "$ME: $*" >&2; exit 1; }

# --- Python: the one thing apt-get cannot fix for us on an older distribution --------------
command -v "$PYTHON" >/dev/null 2>&1 ||
    fail "$PYTHON not found: Sluice needs Python 3.11 or newer (apt-get install python3)"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    fail "Sluice needs Python 3.11 or newer, and $PYTHON is $("$PYTHON" -V 2>&1 | cut -d' ' -f2)" \
        "(install one, then: make PYTHON=python3.11 ...)"
fi

# --- What is missing, and why it is needed ------------------------------------------------
packages=()
reasons=()
need() { packages+=("$1"); reasons+=("$1: $2"); }

"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null ||
    need python3-venv "creates the virtual environment in .venv"
command -v redis-server >/dev/null 2>&1 ||
    need redis-server "the standalone's embedded Redis and the tests' private Redis"
java_major() {
    local version
    version=$(java -version 2>&1 | head -n1)
    version=${version#*\"}
    version=${version%%\"*}
    case $version in
        1.*) version=${version#1.} ;;
    esac
    echo "${version%%[!0-9]*}"
}
if ! command -v java >/dev/null 2>&1; then
    need default-jre-headless "a Java runtime for PySpark (the report jobs)"
elif [ "$(java_major)" -lt 17 ] 2>/dev/null; then
    need default-jre-headless "PySpark needs Java 17 or newer, and java is $(java_major)"
fi
[ -f "$JDBC_JAR" ] ||
    need libpostgresql-jdbc-java "the PostgreSQL JDBC driver the report jobs write with"
server_bin=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | head -n1 || true)
if [ -z "$server_bin" ] && ! command -v initdb >/dev/null 2>&1; then
    postgres_missing=1
else
    postgres_missing=0
fi
command -v curl >/dev/null 2>&1 || need curl "the README's examples and the admin scripts"
command -v jq >/dev/null 2>&1 || need jq "the admin scripts in scripts/"
command -v chromium >/dev/null 2>&1 ||
    need chromium "the headless browser the web console's end-to-end tests drive"
node_major() {
    local version
    version=$(node --version 2>/dev/null)
    version=${version#v}
    echo "${version%%[!0-9]*}"
}
if ! command -v node >/dev/null 2>&1; then
    need nodejs "Node.js runs the WebSocket API's test with a non-Python client (npm's ws)"
elif [ "$(node_major)" -lt 18 ] 2>/dev/null; then
    need nodejs "the WebSocket API's Node.js test needs node 18 or newer, and node is $(node_major)"
fi
command -v npm >/dev/null 2>&1 ||
    need npm "installs that test's ws package from tests/node/package-lock.json (npm ci)"
command -v prometheus >/dev/null 2>&1 ||
    need prometheus "the test that evaluates every query of the Grafana dashboards (no service)"

if [ ${#packages[@]} -eq 0 ] && [ $postgres_missing = 0 ]; then
    exit 0
fi

all=("${packages[@]}")
[ $postgres_missing = 1 ] && all+=(postgresql)

# --- Installing ---------------------------------------------------------------------------
command -v apt-get >/dev/null 2>&1 ||
    fail "no apt-get here: install these with your package manager, then run make again:" \
        "${all[*]}"
SUDO=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
        fail "not root and sudo is not installed: as root, run" \
            "'apt-get install ${all[*]}', then run make again"
    SUDO=(sudo)
fi
as_root() { "${SUDO[@]}" "$@"; }

echo "$ME: installing what Sluice needs and this machine lacks:"
for reason in "${reasons[@]}"; do echo "  $reason"; done
[ $postgres_missing = 1 ] &&
    echo "  postgresql: initdb and postgres, for the tests' throw-away PostgreSQL" \
        "(no cluster is created)"

# Packages of services (redis-server) would start them on install: a policy-rc.d that says
# no keeps them stopped while this script installs. One that exists already is left alone.
policy=/usr/sbin/policy-rc.d
restore_conf=""
cleanup() {
    [ -n "${own_policy:-}" ] && as_root rm -f "$policy"
    [ -n "$restore_conf" ] && as_root cp "$restore_conf" /etc/postgresql-common/createcluster.conf &&
        rm -f "$restore_conf"
    return 0
}
trap cleanup EXIT
if [ ! -e "$policy" ]; then
    as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    own_policy=1
fi

apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@"
}
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
[ ${#packages[@]} -eq 0 ] || apt_install "${packages[@]}"

if [ $postgres_missing = 1 ]; then
    # postgresql-common's createcluster.conf decides whether installing a server creates a
    # 'main' cluster on port 5432: switched off for this install, the file restored after.
    apt_install postgresql-common
    conf=/etc/postgresql-common/createcluster.conf
    restore_conf=$(mktemp)
    cp -p "$conf" "$restore_conf"
    as_root sh -c "echo 'create_main_cluster = false' >> $conf"
    version=$(/usr/share/postgresql-common/supported-versions | tail -n1)
    apt_install "postgresql-$version"
fi
echo "$ME: done"
