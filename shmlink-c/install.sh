#!/usr/bin/env bash
# Builds libshmlink (release) and installs it under PREFIX (default /usr/local): lib/libshmlink.so,
# lib/libshmlink.a, include/shmlink.h, include/shmlink.hpp and lib/pkgconfig/shmlink.pc. Then:
#   cc app.c $(pkg-config --cflags --libs shmlink)            # shared
#   cc app.c $(pkg-config --cflags --libs --static shmlink)   # static, with -Wl,-Bstatic where needed
set -euo pipefail
prefix=${1:-/usr/local}
here=$(cd "$(dirname "$0")" && pwd)
cargo build --release --quiet --manifest-path "$here/Cargo.toml"
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$here/Cargo.toml" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
version=$(grep -m1 '^version' "$here/Cargo.toml" | cut -d'"' -f2)
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0644 "$target/release/libshmlink.a" "$prefix/lib/"
install -m 0755 "$target/release/libshmlink.so" "$prefix/lib/"
install -m 0644 "$here/include/shmlink.h" "$here/include/shmlink.hpp" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/shmlink.pc.in" > "$prefix/lib/pkgconfig/shmlink.pc"
echo "installed libshmlink $version under $prefix"
