#!/bin/sh
# Install the Debian packages kvplan builds against, if pkg-config cannot find
# them: libyaml-dev, libncurses-dev, check, libcurl4-openssl-dev (kvplan-hub, the Hub client; and
# pkg-config itself), and libc6-dev's libc.a.
# make check needs python3 (it reads reports with real JSON/XML parsers).
# With --web (make web), also emscripten, and dpkg-dev with deb-src (make web builds libyaml from its Debian source).
# With --ci, all that and the tools CI's tests drive: tmux (the TUI test), valgrind, clang with libFuzzer, npm, git and
# g++ (the llama.cpp oracle), and chromium (make check-web).
missing=""
if [ "${1:-}" = "--ci" ]; then
    for pair in tmux:tmux valgrind:valgrind clang:clang npm:npm git:git g++:g++; do
        cmd=${pair%%:*} pkg=${pair#*:}
        command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
    done
    # libFuzzer's runtime ships apart from clang on Debian
    [ -n "$(find /usr/lib/llvm-*/lib/clang -name 'libclang_rt.fuzzer*' 2>/dev/null | head -n 1)" ] ||
        missing="$missing libclang-rt-14-dev"
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium" # make check-web
fi
if [ "${1:-}" = "--ci" ] || [ "${1:-}" = "--web" ]; then
    # make web: emcc, and libyaml's Debian source (apt-get source: dpkg-dev, and deb-src in the APT sources)
    for pair in emcc:emscripten dpkg-source:dpkg-dev; do
        cmd=${pair%%:*} pkg=${pair#*:}
        command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
    done
    debsrc=/etc/apt/sources.list.d/debian.sources
    { [ -f "$debsrc" ] && ! grep -q '^Types:.*deb-src' "$debsrc"; } || debsrc=""
fi
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
command -v cc >/dev/null 2>&1 || missing="$missing gcc make"
# the release kvplan is linked statically (Makefile STATIC): libc.a comes with libc6-dev
command -v cc >/dev/null 2>&1 && [ "$(cc -print-file-name=libc.a)" = libc.a ] && missing="$missing libc6-dev"
command -v python3 >/dev/null 2>&1 || missing="$missing python3" # make check reads JSON/XML with it
for pair in yaml-0.1:libyaml-dev ncursesw:libncurses-dev check:check libcurl:libcurl4-openssl-dev; do
    mod=${pair%%:*} pkg=${pair#*:}
    pkg-config --exists "$mod" 2>/dev/null || missing="$missing $pkg"
done
[ -z "$missing${debsrc:-}" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
if [ -n "${debsrc:-}" ]; then
    echo "deps: enabling deb-src in $debsrc (make web: apt-get source libyaml)"
    $sudo sed -i 's/^Types: deb$/Types: deb deb-src/' "$debsrc" || exit 1
fi
echo "deps: installing Debian packages:${missing:- none (the deb-src package lists only)} (apt-get, ${sudo:-as root})"
$sudo apt-get update -qq && $sudo apt-get install -y -qq $missing >/dev/null || {
    echo "deps: could not install:$missing -- install them and run make again" >&2
    exit 1
}
