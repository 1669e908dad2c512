#!/bin/sh
# Install the Debian packages kvplan builds against, if pkg-config cannot find
# them: libyaml-dev, libncurses-dev, check (and pkg-config itself).
missing=""
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
command -v cc >/dev/null 2>&1 || missing="$missing gcc make"
for pair in yaml-0.1:libyaml-dev ncursesw:libncurses-dev check:check; do
    mod=${pair%%:*} pkg=${pair#*:}
    pkg-config --exists "$mod" 2>/dev/null || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
echo "deps: installing Debian packages:$missing (apt-get, ${sudo:-as root})"
$sudo apt-get update -qq && $sudo apt-get install -y -qq $missing >/dev/null || {
    echo "deps: could not install:$missing -- install them and run make again" >&2
    exit 1
}
