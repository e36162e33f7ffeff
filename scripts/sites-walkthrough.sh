#!/usr/bin/env bash
# Many sites on one machine, by hand (README, "Many sites: on one machine,
# by hand"; docs/multi-site.md, "One machine, step by step"): a PostgreSQL
# cluster in a temporary directory, a central `pivgate serve` on it and two
# sites, north and south, each on its own SQLite, linked over mutual TLS on
# loopback. Creates the two sites, a door at each and a cardholder at the
# central through the API, waits until each site holds its part, and prints
# the central's view of its sites. Everything it started is stopped and its
# directory removed on exit.
#
#   scripts/sites-walkthrough.sh          # runs through and cleans up
#   HOLD=1 scripts/sites-walkthrough.sh   # then serves until Ctrl-C (open the dashboard)
#
# Needs PostgreSQL's server binaries (Debian: the `postgresql` package;
# scripts/setup.sh installs it), curl and jq. PIVGATE: the binary (default
# target/debug/pivgate, built if missing). PORT: the first of the four
# loopback ports (default 8080: the APIs on 8080-8082, the central's site
# links on 8083).
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PIVGATE:-target/debug/pivgate}
[ -x "$P" ] || cargo build --locked -p pivgate
P=$(realpath "$P")
PORT=${PORT:-8080}
LINKS=$((PORT + 3))

W=$(mktemp -d /tmp/pivgate-sites.XXXXXX)
chmod 755 "$W"
PIDS=()
AS=
PG=
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -f "$W/pg/data/postmaster.pid" ]; then
        (cd "$W" && $AS "$PG/pg_ctl" -D "$W/pg/data" -m fast -w stop >/dev/null)
    fi
    rm -rf "$W"
}
trap cleanup EXIT
cd "$W"

# 1. PostgreSQL, listening on a Unix socket in $W/pg only. It refuses to run
# as root: as root, its commands run as the `postgres` user (Debian's package
# creates it), which owns its directory.
PG=${PIVGATE_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -x "$PG/initdb" ] || { echo "no PostgreSQL server binaries: install the postgresql package" >&2; exit 1; }
mkdir pg
if [ "$(id -u)" = 0 ]; then chown postgres: pg; AS="runuser -u postgres --"; fi
$AS "$PG/initdb" -D "$W/pg/data" -U pivgate -A trust -E UTF8 --no-locale >/dev/null
$AS "$PG/pg_ctl" -D "$W/pg/data" -l "$W/pg/log" -o "-c listen_addresses='' -k $W/pg" -w start
$AS "$PG/createdb" -h "$W/pg" -U pivgate pivgate

# 2. One test PKI and configuration; a certificate for the central's site
# links and one for each site (its name in it as urn:pivgate:site:NAME).
"$P" init w >/dev/null
cd w
"$P" pki issue-device --pki pki --name 127.0.0.1 --server --ip 127.0.0.1 --out central
"$P" pki issue-device --pki pki --site north --out north
"$P" pki issue-device --pki pki --site south --out south

# 3. Each one's configuration: init's without its seed (the sites' entities
# are made at the central), its own data directory and API port, and its
# table. `database_url` is a top-level key, so it goes first.
sed '/^# Written to the database on the first start only/,$d' pivgate.toml >base.toml
conf() { sed -e "s|^data_dir = .*|data_dir = \"$1-data\"|" -e "s|127.0.0.1:8080|127.0.0.1:$2|" base.toml; }
{ echo "database_url = \"postgres://pivgate@localhost/pivgate?host=$W/pg\""; conf central "$PORT"; cat <<EOF; } >central.toml
[sites]
listen = "127.0.0.1:$LINKS"
cert = "central/127.0.0.1.pem"
key = "central/127.0.0.1.key.pem"
site_ca = ["pki/root.pem"]
EOF
for s in north:$((PORT + 1)) south:$((PORT + 2)); do n=${s%:*}; { conf "$n" "${s#*:}"; cat <<EOF; } >"$n.toml"
[central]
urls = ["https://127.0.0.1:$LINKS"]
site = "$n"
cert = "$n/$n.pem"
key = "$n/$n.key.pem"
ca = "central/ca.pem"
EOF
done

# 4. The three services; each prints the address it serves on.
for n in central north south; do
    "$P" serve --config "$n.toml" 2>"$n.log" &
    PIDS+=($!)
done
up() { # PORT: waits (at most 60 s) until that API is ready
    for _ in $(seq 600); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done
    echo "nothing ready on port $1; see $W/w/*.log" >&2
    exit 1
}
up "$PORT"; up $((PORT + 1)); up $((PORT + 2))

# 5. At the central, through its API: the two sites, a door at each, a
# schedule, Alice, and a group giving her both doors.
T=$("$P" token create --role admin --config central.toml 2>/dev/null)
c() { curl -sf -H "Authorization: Bearer $T" -H 'Content-Type: application/json' "http://127.0.0.1:$PORT$1" ${2:+-d "$2"}; }
for n in north south; do c /api/v1/sites "{\"name\": \"$n\", \"time_zone\": \"UTC\"}"; echo; done
c /api/v1/doors '{"site": 1, "name": "north door", "mechanism": "pki-cak"}'; echo
c /api/v1/doors '{"site": 2, "name": "south door", "mechanism": "pki-cak"}'; echo
c /api/v1/schedules '{"name": "always", "windows": ["mon-sun 00:00-24:00"]}'; echo
c /api/v1/cardholders '{"name": "Alice", "status": "active"}'; echo
c /api/v1/groups '{"name": "everyone", "schedule": 1, "doors": [1, 2], "cardholders": [1]}'; echo

# 6. Each site gets its part: its own door (not the other's) and Alice.
for s in north:$((PORT + 1)) south:$((PORT + 2)); do
    n=${s%:*}
    V=$("$P" token create --role viewer --config "$n.toml" 2>/dev/null)
    get() { curl -sf -H "Authorization: Bearer $V" "http://127.0.0.1:${s#*:}$1" | jq -c '[.items[].name]'; }
    for _ in $(seq 600); do [ "$(get /api/v1/doors)" = "[\"$n door\"]" ] && break; sleep 0.1; done
    echo "$n: doors $(get /api/v1/doors), cardholders $(get /api/v1/cardholders)"
done

# 7. The central's view of its sites (the dashboard's Sites page shows the
# same). A site reports what it applied at most once a second: wait for it.
for _ in $(seq 600); do
    [ "$(c /api/v1/sites/status | jq '[.items[] | select(.link.state == "up" and .changes.pending == 0)] | length')" = 2 ] && break
    sleep 0.1
done
c /api/v1/sites/status | jq -c '.items[] | {name, link: .link.state, pending: .changes.pending, backlog: .upload.backlog}'
echo "dashboard: http://127.0.0.1:$PORT/#/sites (sign in with the token $T)"

if [ -n "${HOLD:-}" ]; then
    echo "serving until Ctrl-C; logs in $W/w/*.log"
    wait
fi
