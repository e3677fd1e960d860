#!/bin/sh
# Builds priv/msgflow_tracer.so and the C tests with CMake (run by rebar3's
# compile hook and by make).  Quiet on success; prints the build log on error.
set -e
cd "$(dirname "$0")/.."
mkdir -p _build
log=_build/cmake.log
if cmake -S . -B _build/cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 &&
   cmake --build _build/cmake -j 2 >>"$log" 2>&1; then
    exit 0
fi
cat "$log" >&2
exit 1
