#!/usr/bin/env bash
# Sets everything up and runs the main job: `pivgate demo`, which starts the
# door service in-process on a temporary database with a test PKI, enrolls
# software PIV cards and taps them at simulated doors (granted and refused for
# each reason), printing each decision with its stage table beside the
# reference door figures. Extra arguments go to `pivgate demo` (e.g. --pcsc to
# go through pcscd+vpcd, --hold to keep the API serving).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo build --release --locked -p pivgate
exec ./target/release/pivgate demo "$@"
