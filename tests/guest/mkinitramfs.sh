#!/usr/bin/env bash
# Pack a guest initramfs: static busybox, /init (tests/guest/init.sh), a test
# list, the test programs and every shared library they load.
#
#   tests/guest/mkinitramfs.sh OUT.cpio STAGE_DIR TESTS_LIST PROGRAM...
#
# The programs are ordinary dynamically linked executables (numacoll's static
# archive, but libhwloc/libnuma/libc as shared libraries: Debian ships no static
# libudev, which libhwloc.a needs). Each goes to /bin/<name> in the guest; the
# libraries `ldd` lists, the ELF loader included, go to the same paths as on the
# host, so the guest runs exactly the host's binaries.
# TESTS_LIST is copied to /tests.list (format: see init.sh).
# The archive is an uncompressed newc cpio: the kernel unpacks it faster than
# it would decompress it, and it stays a few MiB.
set -euo pipefail

out=${1:?usage: mkinitramfs.sh OUT.cpio STAGE_DIR TESTS_LIST PROGRAM...}
stage=${2:?stage dir}
list=${3:?tests list}
shift 3
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$stage"
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,etc}
cp /bin/busybox "$stage/bin/busybox"
install -m 0755 "$here/init.sh" "$stage/init"
cp "$list" "$stage/tests.list"

copy_lib() {
    local lib=$1
    [ -e "$stage$lib" ] && return 0
    mkdir -p "$stage$(dirname "$lib")"
    cp -L "$lib" "$stage$lib"
}

for prog in "$@"; do
    [ -x "$prog" ] || { echo "mkinitramfs: $prog is not an executable" >&2; exit 1; }
    cp "$prog" "$stage/bin/$(basename "$prog")"
    deps=$(LC_ALL=C ldd "$prog" 2>&1) || true
    if [[ "$deps" == *"not a dynamic executable"* ]]; then
        continue
    fi
    if [[ "$deps" == *"not found"* ]]; then
        echo "mkinitramfs: $prog: a library is missing:" >&2
        echo "$deps" >&2
        exit 1
    fi
    # "libx.so.1 => /lib/.../libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
    while read -r lib; do
        copy_lib "$lib"
    done < <(echo "$deps" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done

(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$out.tmp"
mv "$out.tmp" "$out"
