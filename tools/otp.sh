#!/bin/sh
# tools/otp.sh 27: builds Erlang/OTP 27 from Debian's trixie source package
# (erlang 1:27.3.4.1+dfsg), and PropEr from trixie's erlang-proper source
# for it, once, cached outside the clone in
# ${MSGFLOW_OTP_CACHE:-$HOME/.cache/msgflow-otp}/27 (about 6 minutes on 2
# cores the first time).  Prints that OTP's bin directory as its last line.
# tools/otp.sh 29: the same from forky's (testing's) source (erlang
# 1:29.1.1+dfsg, about 6 minutes too), with forky's rebar3 and Elixir (1.20)
# from their binary packages put in its bin directory: Debian 12's rebar3
# 3.19 and Elixir 1.14 do not run on OTP 29.
#
# The system's apt configuration is left as it is: the trixie deb-src entry
# is given to apt-get through its -o options only.  Debian 12's compilers
# build it; applications msgflow needs neither at run time nor in its tests
# are skipped.  `tools/otp.sh 25' prints the system OTP's bin directory.
set -e
release=${1:-27}
if [ "$release" = 25 ]; then
    dirname "$(readlink -f "$(command -v erl)")" | sed 's#/lib/erlang/bin$#/bin#'
    exit 0
fi
case "$release" in
    27) suite=trixie ;;
    29) suite=forky ;;
    *) echo "msgflow: tools/otp.sh builds OTP 27 and 29 (25 is the system's)" >&2; exit 2 ;;
esac
cache=${MSGFLOW_OTP_CACHE:-$HOME/.cache/msgflow-otp}
prefix="$cache/$release"
work="$cache/$release-build"
# done, with Dialyzer (make dialyzer) and edoc (the doc chunks); a cache
# made before they were built gets them added
if [ -x "$prefix/bin/erl" ] && [ -f "$prefix/done" ] && [ -x "$prefix/bin/dialyzer" ] &&
       ls -d "$prefix"/lib/erlang/lib/dialyzer-* >/dev/null 2>&1 &&
       ls -d "$prefix"/lib/erlang/lib/edoc-* >/dev/null 2>&1 &&
       { [ "$release" != 29 ] || { [ -x "$prefix/bin/rebar3" ] && [ -x "$prefix/bin/mix" ]; }; }; then
    echo "$prefix/bin"
    exit 0
fi
"$(dirname "$0")/install-deps.sh" otp >&2 || exit 1
mkdir -p "$work/src"
log="$work/build.log"
: >"$log"
echo "msgflow: building OTP $release in $work (once; log in $log)" >&2
. "$(dirname "$0")/apt-src.sh"
apt_src "$work" "$suite"
# shellcheck disable=SC2086
apt-get $apt_opts update >>"$log" 2>&1 ||
    { echo "msgflow: apt-get update for $suite's sources failed (see $log)" >&2; exit 1; }

# The orig tarball of a source package (the mirror may lack the rest).
fetch_orig() {
    # shellcheck disable=SC2086
    uri=$(apt-get $apt_opts source --print-uris "$1" 2>>"$log" |
              grep -o "'[^']*\.orig\.tar\.[a-z0-9]*'" | head -n 1 | tr -d "'")
    [ -n "$uri" ] || { echo "msgflow: no source of $1 in $suite (see $log)" >&2; exit 1; }
    file="$work/src/$(basename "$uri")"
    [ -s "$file" ] || /usr/lib/apt/apt-helper download-file "$uri" "$file" >>"$log" 2>&1 ||
        { echo "msgflow: cannot fetch $uri (see $log)" >&2; exit 1; }
    echo "$file"
}

otp_tar=$(fetch_orig erlang)
proper_tar=$(fetch_orig erlang-proper)

# a tree already compiled (an install that failed after) is installed again
if [ ! -f "$work/otp.built" ]; then
    rm -rf "$work/otp" && mkdir -p "$work/otp"
    tar -xf "$otp_tar" -C "$work/otp" --strip-components=1
    cd "$work/otp"
    # what neither msgflow nor its tests use
    for app in wx megaco diameter odbc jinterface eldap snmp et observer reltool \
               debugger mnesia ftp tftp os_mon ssh erl_docgen; do
        if [ -d "lib/$app" ]; then touch "lib/$app/SKIP"; fi
    done
    {
        ./configure --prefix="$prefix" --without-javac --without-wx --without-odbc \
            --without-megaco --without-observer --without-debugger --without-et &&
            make -j2
    } >>"$log" 2>&1 || { echo "msgflow: OTP $release did not build (see $log)" >&2; exit 1; }
    touch "$work/otp.built"
fi
cd "$work/otp"
# a tree built before Dialyzer or edoc was: they are built now
if [ -f lib/dialyzer/SKIP ] || [ -f lib/edoc/SKIP ]; then
    rm -f lib/dialyzer/SKIP lib/edoc/SKIP
    make -j2 >>"$log" 2>&1 || { echo "msgflow: OTP $release's Dialyzer or edoc did not build (see $log)" >&2; exit 1; }
fi
# the dfsg tarball lacks two jQuery files common_test's install copies
for f in lib/common_test/priv/jquery-latest.js lib/common_test/priv/jquery.tablesorter.min.js; do
    [ -f "$f" ] || : >"$f"
done
make install >>"$log" 2>&1 || { echo "msgflow: OTP $release did not install (see $log)" >&2; exit 1; }

# PropEr for it: compiled with its erlc (vararg first: a parse transform
# the other modules use)
rm -rf "$work/proper" && mkdir -p "$work/proper"
tar -xf "$proper_tar" -C "$work/proper" --strip-components=1
cd "$work/proper"
vsn=$(sed -n 's/.*{vsn, *"\([^"]*\)".*/\1/p' src/proper.app.src)
dest="$prefix/lib/erlang/lib/proper-$vsn"
mkdir -p "$dest/ebin" "$dest/include"
{
    "$prefix/bin/erlc" -I include -o "$dest/ebin" src/vararg.erl &&
        "$prefix/bin/erlc" -I include -pa "$dest/ebin" -o "$dest/ebin" src/*.erl &&
        cp include/*.hrl "$dest/include/" &&
        sed "s/{modules, *\[\]}/{modules, [$(cd "$dest/ebin" && ls *.beam | sed 's/\.beam$//' | paste -sd, -)]}/" \
            src/proper.app.src >"$dest/ebin/proper.app"
} >>"$log" 2>&1 || { echo "msgflow: PropEr did not build for OTP $release (see $log)" >&2; exit 1; }
"$prefix/bin/erl" -noshell -eval 'ok = application:load(proper), halt().' >>"$log" 2>&1 ||
    { echo "msgflow: PropEr does not load on OTP $release (see $log)" >&2; exit 1; }
# rebar3 and Elixir for OTP 29: forky's binary packages (rebar3 is an
# escript, Elixir's .beam files and scripts), unpacked, not installed
forky_package() { # PACKAGE FILE-IN-IT: unpacked into $work/PACKAGE/x
    [ -e "$work/$1/x/$2" ] && return 0
    rm -rf "$work/$1" && mkdir -p "$work/$1" &&
        (cd "$work/$1" && apt-get $apt_opts download "$1" >>"$log" 2>&1 &&
             dpkg-deb -x "$1"_*.deb x >>"$log" 2>&1) ||
        { echo "msgflow: no $1 from $suite for OTP 29 (see $log)" >&2; exit 1; }
}
if [ "$release" = 29 ]; then
    apt_src "$work/bin-apt" "$suite" deb
    # shellcheck disable=SC2086
    apt-get $apt_opts update >>"$log" 2>&1 ||
        { echo "msgflow: apt-get update for $suite's packages failed (see $log)" >&2; exit 1; }
    forky_package rebar3 usr/bin/rebar3
    cp "$work/rebar3/x/usr/bin/rebar3" "$prefix/bin/rebar3"
    forky_package elixir usr/lib/elixir/bin/elixir
    rm -rf "$prefix/elixir" && cp -a "$work/elixir/x/usr/lib/elixir" "$prefix/elixir"
    for b in elixir elixirc iex mix; do ln -sf ../elixir/bin/$b "$prefix/bin/$b"; done
    # (its scripts run the erl found first on PATH)
    PATH="$prefix/bin:$PATH" ERL_CRASH_DUMP=/dev/null "$prefix/bin/elixir" -e 'IO.puts(:ok)' >>"$log" 2>&1 ||
        { echo "msgflow: forky's Elixir does not run on OTP 29 (see $log)" >&2; exit 1; }
fi
echo "$prefix/bin" >"$prefix/done"
echo "$prefix/bin"
