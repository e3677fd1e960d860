#!/bin/sh
# Builds priv/msgflow_tracer.so and the C tests with CMake (run by rebar3's
# compile hook and by make).  Quiet on success; prints the build log on error.
set -e
cd "$(dirname "$0")/.."
mkdir -p _build
log=_build/cmake.log
# jemalloc from Debian's source, built once (tools/jemalloc.sh); without
# it the NIF uses the system's libjemalloc or enif_alloc.
je=$(tools/jemalloc.sh 2>>_build/jemalloc.err | tail -n 1) || je=""
if cmake -S . -B _build/cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DMSGFLOW_JEMALLOC_DIR="$je" >"$log" 2>&1 &&
   cmake --build _build/cmake -j 2 >>"$log" 2>&1; then
    exit 0
fi
cat "$log" >&2
exit 1
