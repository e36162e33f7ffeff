#!/usr/bin/env bash
# Installs everything pivgate needs on a fresh Debian machine, idempotently:
# the PC/SC stack with the vpcd virtual reader, the interop peers (OpenSC,
# yubico-piv-tool, pyscard, ykman, libosdp) and the benchmark peers (OpenSSL, GnuTLS, nginx, Python
# cryptography), axe-core for the dashboard's accessibility checks, and what
# the Debian package, its systemd unit and the monitoring tests use
# (dpkg-dev, man-db, systemd-analyze, promtool), and rsyslog with its GnuTLS
# driver, the syslog receiver of the SIEM export tests. Safe to run again; it only
# installs what is missing.
set -euo pipefail

PACKAGES=(
  pcscd vsmartcard-vpcd libpcsclite-dev pkg-config pcsc-tools
  opensc yubico-piv-tool python3-pyscard python3-venv
  openssl libssl-dev gnutls-bin libgnutls28-dev python3-cryptography
  build-essential hyperfine postgresql nginx-light
  chromium chromium-driver
  dpkg-dev fakeroot man-db systemd adduser prometheus
  rsyslog rsyslog-gnutls
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

# ykman (yubikey-manager, from PyPI) for the YubiKey interop tests. It drives
# the reader through pyscard: a virtual environment over the system Python
# reuses Debian's python3-pyscard (no compiler or PC/SC headers needed), and
# pip into the distribution's Python is refused (PEP 668). The version is
# pinned so that a later release cannot pull in a pyscard that must be built
# from source. The venv lives in /opt (or under the home directory when /opt
# is not writable), and the command is linked into /usr/local/bin so that
# tests find it on PATH.
YKMAN_VERSION=5.9.2
if [ -n "${PIVGATE_YKMAN_VENV:-}" ]; then
  YKMAN_VENV="$PIVGATE_YKMAN_VENV"
elif mkdir -p /opt/pivgate 2>/dev/null && [ -w /opt/pivgate ]; then
  YKMAN_VENV=/opt/pivgate/ykman-venv
else
  YKMAN_VENV="${HOME:-/root}/.cache/pivgate/ykman-venv"
fi
ykman_installed() {
  local shown
  "$YKMAN_VENV/bin/ykman" --version >/dev/null 2>&1 &&
    shown="$("$YKMAN_VENV/bin/pip" show yubikey-manager 2>/dev/null)" &&
    grep -qx "Version: $YKMAN_VERSION" <<<"$shown"
}
if ! ykman_installed; then
  echo "setup: installing ykman (yubikey-manager $YKMAN_VERSION) into $YKMAN_VENV" >&2
  /usr/bin/python3 -m venv --system-site-packages "$YKMAN_VENV"
  "$YKMAN_VENV/bin/pip" install -q --disable-pip-version-check "yubikey-manager==$YKMAN_VERSION"
fi
# Link it unless another working ykman that is not a link of ours comes first.
LINK=/usr/local/bin/ykman
if [ "$(readlink "$LINK" 2>/dev/null)" != "$YKMAN_VENV/bin/ykman" ] &&
  { [ -L "$LINK" ] || ! command -v ykman >/dev/null 2>&1; }; then
  if [ -w /usr/local/bin ]; then
    ln -sfn "$YKMAN_VENV/bin/ykman" "$LINK"
  else
    echo "setup: add $YKMAN_VENV/bin to PATH for ykman" >&2
  fi
fi

# libosdp (PyPI), the reference OSDP implementation the links crate's interop
# tests run against (crates/links/tests/peers/). Its own virtual environment;
# the tests find it at this path (or through PIVGATE_OSDP_PYTHON).
OSDP_VENV="${PIVGATE_OSDP_VENV:-$HOME/.cache/pivgate/osdp-venv}"
if ! "$OSDP_VENV/bin/python" -c "import osdp" >/dev/null 2>&1; then
  echo "setup: installing libosdp into $OSDP_VENV" >&2
  /usr/bin/python3 -m venv "$OSDP_VENV"
  "$OSDP_VENV/bin/pip" install -q --disable-pip-version-check libosdp
fi

# axe-core (npm), the accessibility rules the dashboard's browser tests run
# in every page (crates/cli/tests/dashboard.rs). Pinned, so that a new rule
# in a later release cannot fail a test nobody changed. npm comes with
# Debian's npm package unless a Node.js with its own npm is installed.
AXE_VERSION=4.14.1
if [ -n "${PIVGATE_NPM_DIR:-}" ]; then
  NPM_DIR="$PIVGATE_NPM_DIR"
elif mkdir -p /opt/pivgate 2>/dev/null && [ -w /opt/pivgate ]; then
  NPM_DIR=/opt/pivgate/npm
else
  NPM_DIR="${HOME:-/root}/.cache/pivgate/npm"
fi
axe_installed() {
  [ -f "$NPM_DIR/node_modules/axe-core/axe.min.js" ] &&
    grep -q "\"version\": \"$AXE_VERSION\"" "$NPM_DIR/node_modules/axe-core/package.json"
}
if ! axe_installed; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing npm" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  echo "setup: installing axe-core $AXE_VERSION into $NPM_DIR" >&2
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --no-save --no-audit --no-fund --silent "axe-core@$AXE_VERSION"
fi
