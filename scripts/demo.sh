#!/usr/bin/env bash
# Sets everything up and runs the main job: `pivgate demo`, which creates a
# test PKI and software PIV cards in a temporary directory and runs door taps
# in-process, printing each stage's time beside the reference door figures.
# Extra arguments go to `pivgate demo` (e.g. --pcsc to go through pcscd+vpcd).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo build --release --locked -p pivgate
exec ./target/release/pivgate demo "$@"
