#!/usr/bin/env bash
# Install what numacoll needs to build, test and benchmark on Debian/Ubuntu.
# Idempotent: asks apt-get only for packages that are missing.
# Usage: scripts/install-deps.sh [build|test|bench|guest]...  (default: build)
set -euo pipefail

want=(build-essential cmake pkg-config libhwloc-dev hwloc libnuma-dev numactl
      openmpi-bin libopenmpi-dev mpich libmpich-dev)
for what in "$@"; do
    case "$what" in
    build) ;;
    test) want+=(python3-matplotlib gfortran) ;;  # gfortran: tests/fortran
    bench) want+=(python3 python3-matplotlib) ;;
    guest) want+=(qemu-system-x86 busybox-static cpio) ;;
    *) echo "install-deps: unknown set '$what' (valid: build test bench guest)" >&2; exit 2 ;;
    esac
done

missing=()
for pkg in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "install-deps: missing ${missing[*]} and no apt-get here; install them by hand" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
