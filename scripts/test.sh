#!/usr/bin/env bash
# Sets everything up and runs every test: formatting, lints, unit tests,
# PKITS, and the interop tests that start pcscd + vpcd and drive the software
# card with OpenSC and yubico-piv-tool. Needs root (pcscd and apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo build (fuzz targets compile)" >&2
cargo build --locked --manifest-path fuzz/Cargo.toml --bins
echo "== cargo test" >&2
# Interop tests share the single vpcd reader; test binaries run one at a time.
cargo test --workspace --locked -- --test-threads=2
echo "== benchmark report (smoke)" >&2
# Every section of ./scripts/bench.sh at a token size (benches run their own
# smoke pass): the report is written and no section fails; nothing timed is
# judged.
# The binary `cargo test --workspace` built for the report's integration
# test, with the same features as the benches the sections run (no rebuild).
"${CARGO_TARGET_DIR:-target}/debug/pivgate-bench" --smoke --out target/bench-smoke
