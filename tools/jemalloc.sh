#!/bin/sh
# Builds jemalloc from Debian's own source package into a static, position
# independent library with a private prefix (mf_je_*) and no initial-exec
# TLS, so that it links into the NIF and loads into a running beam.smp with
# no GLIBC_TUNABLES and no system libjemalloc.  Built once, cached in
# _build/jemalloc/ (about 1.5 minutes on 2 cores).  The system's apt
# configuration is left as it is: the deb-src entry is given to apt-get
# through its -o options only.
#
# Prints the build's directory as its last line (lib/libjemalloc_pic.a and
# include/jemalloc/jemalloc.h under it); exits 1 when it cannot build, and
# the NIF then falls back to enif_alloc.
set -e
cd "$(dirname "$0")/.."
top=$(pwd)
out="$top/_build/jemalloc"
if [ -f "$out/done" ]; then
    cat "$out/done"
    exit 0
fi
mkdir -p "$out/src"
log="$out/build.log"
: >"$log"
. "$top/tools/apt-src.sh"
apt_src "$out" bookworm
{
    # shellcheck disable=SC2086
    apt-get $apt_opts update &&
        (cd "$out/src" && apt-get $apt_opts source --download-only jemalloc)
} >>"$log" 2>&1 || { echo "msgflow: cannot fetch jemalloc's source (see $log)" >&2; exit 1; }
orig=$(ls "$out"/src/jemalloc_*.orig.tar.* | head -n 1)
rm -rf "$out/tree" && mkdir -p "$out/tree"
tar -xf "$orig" -C "$out/tree" --strip-components=1
cd "$out/tree"
# No initial-exec TLS (it cannot be dlopen'ed into a running VM), a private
# prefix and namespace (never the process's malloc), PIC for the NIF.
if ./configure --disable-initial-exec-tls --with-jemalloc-prefix=mf_je_ \
       --with-private-namespace=mf_je_internal_ --with-pic --disable-cxx \
       --disable-shared --enable-static --without-export >>"$log" 2>&1 &&
   make -j2 build_lib_static >>"$log" 2>&1; then
    echo "$out/tree" >"$out/done"
    echo "$out/tree"
else
    echo "msgflow: jemalloc did not build (see $log)" >&2
    exit 1
fi
