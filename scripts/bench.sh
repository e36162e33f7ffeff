#!/usr/bin/env bash
# Sets everything up and runs the benchmark report: every performance story
# pivgate answers, measured beside its peers in one run (OpenSSL, GnuTLS,
# Python, Go, PostgreSQL, the reference door), written to
# bench-report/index.html (self-contained, inline SVG charts),
# bench-report/summary.md and bench-report/data.json. Each figure names the
# command that reproduces it alone.
#
#   ./scripts/bench.sh            # the full run (under 20 minutes on 2 cores)
#   ./scripts/bench.sh --quick    # smaller sizes, fewer samples (under 3 minutes)
#   ./scripts/bench.sh --only door --only log-size   # some sections (--list names them)
#
#   ./scripts/bench.sh --quick --compare old/data.json   # each figure's change, beyond noise marked
#   ./scripts/bench.sh --benchmarks-md BENCHMARKS.md      # and rewrite its generated tables
#
# Other arguments go to `pivgate-bench` (`--out DIR`, `--smoke`, `--compare
# OLD.json`, `--benchmarks-md FILE`; `--help` lists them). Needs root
# for the packages and for the sections that start pcscd.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

# Go builds the crypto/x509 peer of the path-building and trust sections.
if ! command -v go >/dev/null 2>&1; then
  echo "bench: installing golang-go" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
fi

# Python `cryptography` 39 or later (PyPI), the trust section's Python
# peer: `load_pem_x509_certificates` is newer than Debian 12's package (38).
# Its own virtual environment, as scripts/setup.sh does for libosdp, so
# that the distribution's Python is left alone (PEP 668); the sections find
# it at this path (or through PIVGATE_BENCH_PYTHON).
BENCH_VENV="${PIVGATE_BENCH_VENV:-$HOME/.cache/pivgate/bench-venv}"
if ! "$BENCH_VENV/bin/python" -c \
  'from cryptography import x509; x509.load_pem_x509_certificates' >/dev/null 2>&1; then
  echo "bench: installing cryptography>=39 into $BENCH_VENV" >&2
  /usr/bin/python3 -m venv "$BENCH_VENV"
  "$BENCH_VENV/bin/pip" install -q --disable-pip-version-check 'cryptography>=39'
fi
export PIVGATE_BENCH_PYTHON="$BENCH_VENV/bin/python"

# Build first, so that the sections' times are measuring, not compiling:
# the report, the trust section's probe (run as a whole process per load),
# and every bench the sections run (release).
echo "== building pivgate-bench, pivgate-trust-probe and the benches (release)" >&2
cargo build --release --locked --workspace --bin pivgate-bench --bin pivgate-trust-probe
cargo bench --locked --workspace --no-run

exec "${CARGO_TARGET_DIR:-target}/release/pivgate-bench" "$@"
