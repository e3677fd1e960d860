#!/bin/sh
# Builds msgflow as it was at a revision (make bench's BENCH_BASE), for the
# benches that run the old tree beside this one, and prints the old tree's
# ebin directory.  Built once per revision and OTP release, under
# _build/bench/base-<rev>-otp<release>/ (log: that directory's build.log),
# with this tree's jemalloc (built once, tools/jemalloc.sh).
set -e
cd "$(dirname "$0")/../.."
rev=$(git rev-parse --short "${1:?usage: base.sh REV}")
rel=$(erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().')
root=$(pwd)
dir=$root/_build/bench/base-$rev-otp$rel
if [ ! -f "$dir/done" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/_build"
    git archive "$rev" | tar -x -C "$dir"
    for j in jemalloc jemalloc.fallback; do
        [ ! -e "_build/$j" ] || ln -s "$root/_build/$j" "$dir/_build/$j"
    done
    echo "msgflow: building $rev into $dir (once; log: $dir/build.log)" >&2
    (cd "$dir" && env -u REBAR_BASE_DIR -u MSGFLOW_CMAKE_DIR rebar3 compile) \
        >"$dir/build.log" 2>&1 || { tail -20 "$dir/build.log" >&2; exit 1; }
    : >"$dir/done"
fi
echo "$dir/_build/default/lib/msgflow/ebin"
