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
# Other arguments go to `pivgate-bench` (`--out DIR`, `--smoke`). Needs root
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

# Build first, so that the sections' times are measuring, not compiling:
# the report itself and every bench it runs (release).
echo "== building pivgate-bench and the benches (release)" >&2
cargo build --release --locked --workspace --bin pivgate-bench
cargo bench --locked --workspace --no-run

exec "${CARGO_TARGET_DIR:-target}/release/pivgate-bench" "$@"
