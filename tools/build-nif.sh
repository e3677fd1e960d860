#!/bin/sh
# Builds priv/msgflow_tracer.so and the C tests with CMake (run by rebar3's
# compile hook and by make).  Quiet on success; prints the build log on error.
# One build directory per OTP release (MSGFLOW_CMAKE_DIR, _build/cmake by
# default; the Makefile's OTP=27 sets another): the NIF is built there with
# the headers of the `erl' on PATH and copied into priv/ each time, so that
# priv/ holds the one for the OTP release being built for; the C tools
# likewise into the rebar3 build directory's bin/ (_build/bin).
set -e
cd "$(dirname "$0")/.."
dir=${MSGFLOW_CMAKE_DIR:-_build/cmake}
mkdir -p _build priv
log=$dir.log
# jemalloc from Debian's source, built once (tools/jemalloc.sh); without
# it the NIF uses the system's libjemalloc or enif_alloc.
# (stdout: rebar3 shows a hook's stdout, not its stderr)
# Tried once: after a failure (_build/jemalloc.fallback) the fallback
# stands until `make clean'.
je=""
if [ ! -f _build/jemalloc.fallback ]; then
    if [ ! -f _build/jemalloc/done ]; then
        echo "msgflow: building jemalloc from Debian's source into _build/jemalloc" \
             "(about 2 minutes on 2 cores, once; log: _build/jemalloc/build.log)"
    fi
    je=$(tools/jemalloc.sh 2>>_build/jemalloc.err | tail -n 1) || je=""
    if [ -z "$je" ]; then
        echo "msgflow: jemalloc could not be built from Debian's source (see" \
             "_build/jemalloc.err): the NIF allocates from the system's libjemalloc," \
             "else enif_alloc (msgflow:info() says which)"
        : >_build/jemalloc.fallback
    fi
fi
# rebar3's build directory (REBAR_BASE_DIR, which the Makefile sets per
# release; as a dependency the project's, above its REBAR_BUILD_DIR): the
# tools go to its bin/, beside default/lib/msgflow, the code msgflow-top
# ships, with this build's NIF (priv/ holds the last release's built)
if [ -n "$REBAR_BASE_DIR" ]; then
    base=$REBAR_BASE_DIR
elif [ -n "$REBAR_BUILD_DIR" ]; then
    base=$(dirname "$REBAR_BUILD_DIR")
else
    base=_build
fi
if cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DMSGFLOW_JEMALLOC_DIR="$je" >"$log" 2>&1 &&
   cmake --build "$dir" -j 2 >>"$log" 2>&1; then
    # new files, renamed over the old: a VM that has the old NIF loaded
    # keeps it mapped, a running tool its binary
    mkdir -p "$base/bin"
    cp "$dir/msgflow_tracer.so" priv/.msgflow_tracer.so.new
    mv priv/.msgflow_tracer.so.new priv/msgflow_tracer.so
    for t in msgflow-report msgflow-top msgflow_tracer.so; do
        src="$dir/bin/$t"
        [ "$t" = msgflow_tracer.so ] && src="$dir/$t"
        cp "$src" "$base/bin/.$t.new"
        mv "$base/bin/.$t.new" "$base/bin/$t"
    done
    exit 0
fi
cat "$log" >&2
exit 1
