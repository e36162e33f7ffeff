#!/usr/bin/env bash
# Installs everything pivgate needs on a fresh Debian machine, idempotently:
# the PC/SC stack with the vpcd virtual reader, the interop peers (OpenSC,
# yubico-piv-tool, pyscard) and the benchmark peers (OpenSSL, GnuTLS, Python
# cryptography). Safe to run again; it only installs what is missing.
set -euo pipefail

PACKAGES=(
  pcscd vsmartcard-vpcd libpcsclite-dev pkg-config pcsc-tools
  opensc yubico-piv-tool python3-pyscard
  openssl libssl-dev gnutls-bin libgnutls28-dev python3-cryptography
  build-essential hyperfine postgresql
  chromium chromium-driver
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: system packages present" >&2
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo (Rust stable) is required; install it with rustup" >&2
  exit 1
fi
