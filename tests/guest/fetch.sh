#!/usr/bin/env bash
# Fetch what the NUMA guest tests need, into a cache directory; never installs a
# kernel on the host.
#
#   tests/guest/fetch.sh CACHE_DIR
#
# 1. qemu-system-x86, busybox-static and cpio: apt-get install when missing
#    (through scripts/install-deps.sh guest, with sudo when not root).
# 2. The Debian cloud kernel: the newest concrete linux-image-*-cloud-amd64 that
#    apt-cache offers, fetched with `apt-get download` and unpacked with
#    dpkg-deb (only its /boot) into CACHE_DIR/kernel/<package>/. Later runs
#    reuse it. The ELF vmlinux is extracted from vmlinuz when possible (PVH boot).
#
# On success prints `KERNEL=<path to vmlinux or vmlinuz>` and exits 0. When something
# outside numacoll is missing (no apt, no network, no package), prints the reason
# and exits 77, which CTest reports as skipped.
#
# Overrides: NUMACOLL_GUEST_KERNEL=/path/to/vmlinuz (use that kernel, fetch none),
#            NUMACOLL_GUEST_KERNEL_PKG=linux-image-...-cloud-amd64 (that package),
#            NUMACOLL_GUEST_PVH=0 (boot vmlinuz through SeaBIOS, no extraction).
set -uo pipefail

SKIP=77
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${1:?usage: fetch.sh CACHE_DIR}
mkdir -p "$cache" || { echo "guest-fetch: cannot create $cache"; exit $SKIP; }
cache=$(cd "$cache" && pwd)

skip() { echo "guest-fetch: SKIP: $*"; exit $SKIP; }

# One fetcher at a time per cache (ctest -j, several shapes).
exec 9>"$cache/.lock"
flock -w 600 9 || skip "could not lock $cache/.lock"

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"

# ---- host tools ----------------------------------------------------------------
# busybox must be the static one (busybox-static): nothing else is in the guest.
need_tools() {
    command -v qemu-system-x86_64 >/dev/null && command -v cpio >/dev/null &&
        [ -x /bin/busybox ] && [[ "$(LC_ALL=C ldd /bin/busybox 2>&1)" == *"not a dynamic"* ]] &&
        [[ $'\n'"$(/bin/busybox --list 2>/dev/null)"$'\n' == *$'\n'poweroff$'\n'* ]]
}
if ! need_tools; then
    echo "guest-fetch: installing qemu-system-x86 busybox-static cpio"
    if [ -x "$top/scripts/install-deps.sh" ]; then
        # install-deps uses plain sudo; make it non-interactive so it cannot hang.
        if [ -n "$sudo" ]; then
            sudo -n true 2>/dev/null ||
                skip "qemu-system-x86/busybox-static/cpio missing, not root and no password-less sudo"
        fi
        "$top/scripts/install-deps.sh" guest </dev/null || true
    fi
    need_tools || skip "qemu-system-x86_64, static busybox (busybox-static) or cpio not available and not installable"
fi

# ---- kernel ----------------------------------------------------------------------
if [ -n "${NUMACOLL_GUEST_KERNEL:-}" ]; then
    [ -r "$NUMACOLL_GUEST_KERNEL" ] || skip "NUMACOLL_GUEST_KERNEL=$NUMACOLL_GUEST_KERNEL is not readable"
    echo "KERNEL=$NUMACOLL_GUEST_KERNEL"
    exit 0
fi

find_vmlinuz() { ls "$1"/boot/vmlinuz-* 2>/dev/null | head -n1; }

# The uncompressed ELF kernel inside vmlinuz, when it has a PVH entry note:
# qemu then starts it directly (no SeaBIOS, no decompression in the guest),
# about 4 s faster per boot under TCG here. Prints the vmlinux path, or the
# vmlinuz path when extraction is not possible (missing tool, no PVH note).
pvh_kernel() {
    local z=$1 out=${1%/*}/vmlinux
    [ "${NUMACOLL_GUEST_PVH:-1}" = 1 ] || { echo "$z"; return; }
    if [ -s "$out" ]; then echo "$out"; return; fi
    command -v readelf >/dev/null || { echo "$z"; return; }
    local magic tool off
    for magic in 'zstd:\x28\xb5\x2f\xfd' 'lz4:\x02\x21\x4c\x18' 'xz:\xfd\x37\x7a\x58\x5a\x00' 'gzip:\x1f\x8b\x08\x00'; do
        tool=${magic%%:*}
        command -v "$tool" >/dev/null || continue
        off=$(LC_ALL=C grep -obUaP "${magic#*:}" "$z" 2>/dev/null | head -n1 | cut -d: -f1)
        [ -n "$off" ] || continue
        # Trailing data after the stream makes the tools complain; the output is whole.
        tail -c +$((off + 1)) "$z" | "$tool" -dc 2>/dev/null >"$out.tmp"
        # PVH entry: Xen ELF note type 0x12 (XEN_ELFNOTE_PHYS32_ENTRY).
        if readelf -h "$out.tmp" >/dev/null 2>&1 &&
            LC_ALL=C readelf -n "$out.tmp" 2>/dev/null | grep -q 'Xen .*(0x00000012)'; then
            mv "$out.tmp" "$out"
            echo "$out"
            return
        fi
        rm -f "$out.tmp"
    done
    echo "$z"
}

# Reuse a cached kernel: the package recorded by the last successful fetch.
if [ -z "${NUMACOLL_GUEST_KERNEL_PKG:-}" ] && [ -s "$cache/kernel.pkg" ]; then
    pkg=$(cat "$cache/kernel.pkg")
    k=$(find_vmlinuz "$cache/kernel/$pkg")
    if [ -n "$k" ]; then echo "KERNEL=$(pvh_kernel "$k")"; exit 0; fi
fi

command -v apt-cache >/dev/null && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    skip "no kernel in $cache and no apt-get/apt-cache/dpkg-deb to fetch one"

# Concrete ABI packages only (linux-image-6.1.0-56-cloud-amd64,
# linux-image-6.12.117+deb12-cloud-amd64), not the meta packages
# (linux-image-cloud-amd64, linux-image-6.12-cloud-amd64), with a candidate.
list_kernels() {
    apt-cache search --names-only '^linux-image-[0-9].*-cloud-amd64$' 2>/dev/null |
        awk '{print $1}' | grep -Ev '^linux-image-[0-9]+\.[0-9]+-cloud-amd64$' | sort -V
}
pick_kernel() {
    local all
    all=$(list_kernels)
    [ -n "$all" ] || return 1
    # One apt-cache policy call for all of them; keep those with a candidate
    # (a name can linger in the lists without a downloadable version).
    # shellcheck disable=SC2086
    apt-cache policy $all 2>/dev/null |
        awk '/^[^ ]/ {sub(":$", "", $1); p = $1} /Candidate: [0-9]/ {print p}' |
        sort -V | tail -n1 | grep .
}

pkg=${NUMACOLL_GUEST_KERNEL_PKG:-}
if [ -z "$pkg" ]; then
    pkg=$(pick_kernel)
    if [ -z "$pkg" ]; then
        echo "guest-fetch: no cloud kernel in the apt lists; running apt-get update"
        $sudo apt-get update -qq </dev/null >/dev/null 2>&1 || true
        pkg=$(pick_kernel) || skip "apt-cache offers no linux-image-*-cloud-amd64 package"
    fi
fi

dest="$cache/kernel/$pkg"
k=$(find_vmlinuz "$dest")
if [ -z "$k" ]; then
    dl="$cache/download"
    rm -rf "$dl" "$dest"
    mkdir -p "$dl" "$dest"
    echo "guest-fetch: apt-get download $pkg"
    t0=$(date +%s%N)
    # apt-get download writes into the current directory; as root apt drops to
    # the _apt user, which must be able to write there.
    chmod 0777 "$dl" 2>/dev/null || true
    if ! (cd "$dl" && apt-get download -qq "$pkg" </dev/null); then
        rm -rf "$dl" "$dest"
        skip "apt-get download $pkg failed (no network or package gone)"
    fi
    deb=$(ls "$dl"/*.deb 2>/dev/null | head -n1)
    [ -n "$deb" ] || { rm -rf "$dl" "$dest"; skip "apt-get download $pkg produced no .deb"; }
    # Only /boot is needed: skip the modules (most of the package).
    if ! dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest" --wildcards './boot/*'; then
        rm -rf "$dl" "$dest"
        skip "dpkg-deb could not unpack $deb"
    fi
    rm -rf "$dl"
    k=$(find_vmlinuz "$dest")
    [ -n "$k" ] || skip "$pkg contains no /boot/vmlinuz-*"
    echo "guest-fetch: $pkg fetched and unpacked in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
fi
echo "$pkg" >"$cache/kernel.pkg"
echo "KERNEL=$(pvh_kernel "$k")"
exit 0
