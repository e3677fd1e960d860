# Sourced by tools/jemalloc.sh and tools/otp.sh: `apt_src DIR SUITE [TYPES]'
# gives apt a deb-src entry (or TYPES: `deb' for binary packages) for
# Debian's SUITE through its -o options only (the
# system's apt configuration stays as it is), with its lists under DIR/apt,
# and sets $apt_opts for the apt-get calls that follow.
apt_src() {
    mkdir -p "$1/apt/lists/partial" "$1/apt/parts"
    cat >"$1/apt/parts/msgflow-$2-src.sources" <<EOF2
Types: ${3:-deb-src}
URIs: http://deb.debian.org/debian
Suites: $2
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF2
    # a suite's Release file on a mirror that is a snapshot may have
    # expired: its signature is still checked, its date is not
    apt_opts="-o Dir::Etc::SourceParts=$1/apt/parts -o Dir::Etc::SourceList=/dev/null
-o Dir::State::Lists=$1/apt/lists -o APT::Sandbox::User=root
-o Acquire::Check-Valid-Until=false"
}
