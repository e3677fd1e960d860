#!/bin/sh
# Installs the Debian packages msgflow needs.  As root it installs what is
# missing; otherwise it prints the apt-get line and fails.  On a system
# without dpkg it only says what it would need.
#   install-deps.sh        what building and the demo use (make, make demo)
#   install-deps.sh test   also what the tests drive (make test)
#   install-deps.sh fuzz   also clang and its libFuzzer runtime (make fuzz)
#   install-deps.sh otp    also what building OTP from source needs
#                          (tools/otp.sh: crypto for ssl and rebar3, a
#                          terminal library for erts)
# jemalloc is built from Debian's source when the source archive is
# reachable (tools/jemalloc.sh); the NIF falls back to the system's
# libjemalloc, then enif_alloc, otherwise, which the build says once.
PKGS="gcc libc6-dev make cmake rebar3 erlang-dev erlang-inets erlang-tools libjemalloc2
bzip2"
case "$1" in
    test)
        PKGS="$PKGS erlang-eunit erlang-common-test erlang-dialyzer erlang-proper
erlang-proper-dev graphviz chromium jq tmux elixir prometheus"
        # npm installs the browser test's driver (tools/web/vendor.sh
        # driver); a Node.js from elsewhere that has npm is kept
        command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm" ;;
    fuzz) PKGS="$PKGS clang libclang-rt-dev" ;;
    otp) PKGS="$PKGS perl libssl-dev libncurses-dev xz-utils" ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "msgflow: no dpkg here; make sure these (Debian names) are installed:" $PKGS >&2
    exit 0
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "msgflow: installing$missing"
    apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || exit 1
else
    echo "msgflow: missing Debian packages. Run:" >&2
    echo "  sudo apt-get install -y$missing" >&2
    exit 1
fi
