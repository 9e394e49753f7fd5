#!/usr/bin/env bash
# Install Debian's packages for Podium's container runtime and its tests, if missing:
# squashfs-tools (unsquashfs, mksquashfs), busybox-static (the tests' tiny images), zstd
# (zstd-compressed layers), docker-registry (a real registry on loopback for the import
# tests) and skopeo and umoci (bench/image_import.py's by-hand peer).
# Exit 0 when they are (or already were) installed; non-zero with the reason otherwise.
set -euo pipefail
want=(squashfs-tools busybox-static zstd docker-registry skopeo umoci)
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "install-container-tools.sh: need root to install ${missing[*]}" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "install-container-tools.sh: no apt-get (not Debian?)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/podium-container-install.XXXXXX)
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    apt-get update -q >>"$log" 2>&1 || true  # package lists may be stale on a fresh machine
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || { tail -5 "$log" >&2; exit 1; }
fi
rm -f "$log"
