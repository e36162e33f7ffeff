#!/usr/bin/env bash
# Builds the Debian package: the `pivgate` binary, its manual pages
# (generated from the command-line definitions), the hardened systemd unit,
# the configuration (a conffile) and the maintainer scripts that create the
# `pivgate` system user and /var/lib/pivgate. Files come from contrib/debian.
#
#   scripts/package-deb.sh [--binary PATH] [--out DIR] [--fast]
#
# --fast compresses with gzip -1 instead of xz (for tests of a debug build).
# Without --binary the release binary is built (cargo build --release).
# Prints the path of the .deb. Needs dpkg-dev (dpkg-deb, dpkg-shlibdeps).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
binary=""
out="${CARGO_TARGET_DIR:-$root/target}/debian"
compress=(-Zxz)
while (($#)); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --fast) compress=(-Zgzip -z1); shift ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR] [--fast]" >&2; exit 2 ;;
  esac
done
if [ -z "$binary" ]; then
  (cd "$root" && cargo build --release --locked -p pivgate >&2)
  binary="${CARGO_TARGET_DIR:-$root/target}/release/pivgate"
fi
[ -x "$binary" ] || { echo "package-deb: no executable at $binary" >&2; exit 1; }

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")"
arch="$(dpkg --print-architecture)"
src="$root/contrib/debian"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pkg="$work/pivgate"

install -D -m 0755 "$binary" "$pkg/usr/bin/pivgate"
strip --strip-debug "$pkg/usr/bin/pivgate" 2>/dev/null || true
install -D -m 0644 "$src/pivgate.service" "$pkg/lib/systemd/system/pivgate.service"
install -D -m 0644 "$src/pivgate.toml" "$pkg/etc/pivgate/pivgate.toml"
install -d -m 0755 "$pkg/usr/share/man/man1"
"$pkg/usr/bin/pivgate" man --out "$work/man" >/dev/null
for page in "$work"/man/*.1; do
  gzip -9n <"$page" >"$pkg/usr/share/man/man1/$(basename "$page").gz"
done
install -d -m 0755 "$pkg/usr/share/doc/pivgate"
cat >"$pkg/usr/share/doc/pivgate/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pivgate

Files: *
License: Apache-2.0 or MIT
COPYRIGHT
install -m 0644 "$root/README.md" "$pkg/usr/share/doc/pivgate/README.md"

# Shared-library dependencies as dpkg-shlibdeps finds them.
mkdir -p "$work/debian"
printf 'Source: pivgate\n\nPackage: pivgate\nArchitecture: any\n' >"$work/debian/control"
shlibs="$(cd "$work" && dpkg-shlibdeps -O "pivgate/usr/bin/pivgate" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$shlibs" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
rm -rf "$work/debian"

install -d -m 0755 "$pkg/DEBIAN"
installed_kb="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
cat >"$pkg/DEBIAN/control" <<CONTROL
Package: pivgate
Version: $version
Architecture: $arch
Maintainer: pivgate developers <pivgate@localhost>
Installed-Size: $installed_kb
Depends: $shlibs, adduser, init-system-helpers (>= 1.52)
Recommends: pcscd
Section: admin
Priority: optional
Description: PIV / PKI smart-card door access control
 One process is the authentication module and the door controller: it
 authenticates PIV cards (PKI-CAK, PKI-AUTH) against the configured trust
 anchors and CRLs, decides access, commits each event durably before the
 door opens, and serves an HTTP API, a dashboard and Prometheus metrics.
 Runs as the systemd service pivgate.service (Type=notify, hardened).
CONTROL
echo /etc/pivgate/pivgate.toml >"$pkg/DEBIAN/conffiles"
for s in postinst prerm postrm; do
  install -m 0755 "$src/$s" "$pkg/DEBIAN/$s"
done

mkdir -p "$out"
deb="$out/pivgate_${version}_${arch}.deb"
dpkg-deb --root-owner-group "${compress[@]}" --build "$pkg" "$deb" >/dev/null
echo "$deb"
