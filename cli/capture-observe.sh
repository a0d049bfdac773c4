#!/usr/bin/env bash
# Regenerates the capture in docs/observe.md: runs the traffic example (cli/examples/traffic.rs)
# and, beside it, `shmlink top --once` and `shmlink stat`, then writes what they printed
# between the capture markers, headed by the command, the commit and the machine.
#
#   cli/capture-observe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p shmlink-cli --bin shmlink --example traffic
bin=target/release
prefix="observe"
out=$(mktemp)
trap 'kill "$traffic" 2>/dev/null || true; rm -f "$out" "$out.ready"' EXIT
"$bin/examples/traffic" 6 "$prefix" > "$out.ready" &
traffic=$!
for _ in $(seq 100); do grep -q ready "$out.ready" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$out.ready"
{
    echo "<!-- capture:begin (written by cli/capture-observe.sh) -->"
    echo '```text'
    echo "\$ cli/capture-observe.sh   # commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r)"
    echo "\$ shmlink top --once --interval 2"
    "$bin/shmlink" top --once --interval 2 --width 110
    echo "\$ shmlink stat observe-orders"
    "$bin/shmlink" stat "$prefix-orders"
    echo "\$ shmlink stat observe-ticks --format prometheus | grep messages_total"
    "$bin/shmlink" stat "$prefix-ticks" --format prometheus | grep '^shmlink_messages_total'
    echo '```'
    echo "<!-- capture:end -->"
} > "$out"
wait "$traffic"
python3 - "$out" <<'PY'
import re, sys
capture = open(sys.argv[1]).read()
doc = open("docs/observe.md").read()
doc = re.sub(r"<!-- capture:begin.*?<!-- capture:end -->\n", lambda _: capture, doc, flags=re.S)
open("docs/observe.md", "w").write(doc)
PY
echo "docs/observe.md: capture written"
