# Tasks for shmlink's ping-pong harness. `just` alone lists them. (`just` is a command runner:
# `cargo install just`, or your distribution's `just` package; bin/README.md says more.) Every
# recipe that measures says first whether it measures a debug or a release build.
#
#   BUILD_MODE=release  build and run optimised binaries (default: debug)
#   DURATION=5s         length of one measured round
#   ROUNDS=3            rounds per transport (transports interleaved round by round)
#   TRANSPORTS=shm,uds  transports of run-all / compare / sweep / stream (default: all; `just transports` lists them)
#   SIZES=1KiB,1MiB     message sizes of sweep (default: 1KiB,64KiB,1MiB,16MiB)
#   STREAM_SIZES=8,128  message sizes of stream (default: 8,64,128,256,512,1KiB,2KiB,4KiB,64KiB)
#   COUNT=100000        messages per row of stream (default: what fills about a second)
#   FEATURES=iceoryx2   harness features to build with (iceoryx2: the iceoryx2 row of fanout)

set shell := ["bash", "-euo", "pipefail", "-c"]

build_mode := env_var_or_default("BUILD_MODE", "debug")
duration := env_var_or_default("DURATION", "5s")
rounds := env_var_or_default("ROUNDS", "1")
transports := env_var_or_default("TRANSPORTS", "all")
sizes := env_var_or_default("SIZES", "1KiB,64KiB,1MiB,16MiB")
stream_sizes := env_var_or_default("STREAM_SIZES", "8,64,128,256,512,1KiB,2KiB,4KiB,64KiB")
count := env_var_or_default("COUNT", "")
count_flag := if count == "" { "" } else { "--count " + count }
features := env_var_or_default("FEATURES", "")
feature_flags := if features == "" { "" } else { "--features shmlink-harness/" + features }
target_dir := env_var_or_default("CARGO_TARGET_DIR", "target")
cargo_flags := if build_mode == "release" { "--release" } else { "" }
bin_dir := target_dir / build_mode
# What a measuring recipe says first: which build it measures.
measures := if build_mode == "release" { "[info] measuring a release build" } else { "[info] measuring a DEBUG build (unoptimised: BUILD_MODE=release for figures that mean something)" }

# List the recipes
default:
    @just --list --unsorted

# Build the library and both harness binaries (BUILD_MODE=release for optimised ones, FEATURES=iceoryx2 for fanout's iceoryx2 row)
build:
    @echo "[info] building shmlink ({{build_mode}})"
    cargo build {{cargo_flags}} --bins {{feature_flags}}

# The transports, one a line, from the harness's transport table (DESCRIBE=1: the table itself)
transports: build
    {{bin_dir}}/ipc-parent transports {{ if env_var_or_default("DESCRIBE", "") == "" { "" } else { "--describe" } }}

# Ping-pong over one transport (`just transports` lists them) or limit row (floor, serde); extra ipc-parent options after it
ipc transport *ARGS: build
    @echo "{{measures}}"
    {{bin_dir}}/ipc-parent transports | grep -qx -- "{{transport}}" || [ "{{transport}}" = serde ] \
        || { echo "unknown transport {{transport}}; one of: $({{bin_dir}}/ipc-parent transports | paste -sd' ') serde"; exit 1; }
    {{bin_dir}}/ipc-parent ping-pong --transport {{transport}} --duration {{duration}} --rounds {{rounds}} {{ARGS}}

# Every transport (or TRANSPORTS), interleaved round by round, in one table
run-all *ARGS: build
    @echo "{{measures}}"
    {{bin_dir}}/ipc-parent ping-pong --transport {{transports}} --duration {{duration}} --rounds {{rounds}} {{ARGS}}

# Same transports in a debug and a release build, their rounds interleaved (debug, release, debug, ...: one document each in results/compare-<mode>-<round>.json), one table with each document's commit and load and the release/debug ratio
compare *ARGS:
    mkdir -p results
    cargo build --bins
    cargo build --release --bins
    @echo "[info] measuring a debug and a release build, {{rounds}} round(s) each, interleaved"
    rm -f results/compare-debug-*.json results/compare-release-*.json
    for round in $(seq 1 {{rounds}}); do for mode in debug release; do \
        {{target_dir}}/$mode/ipc-parent ping-pong --transport {{transports}} --duration {{duration}} --rounds 1 --json {{ARGS}} > results/compare-$mode-$round.json; \
    done; done
    {{target_dir}}/release/ipc-parent compare results/compare-debug-*.json results/compare-release-*.json

# Payload sweep (SIZES): MB/s per transport and size beside memcpy; saves results/sweep-<mode>.json, draws docs/sweep-chart.svg
sweep *ARGS: build
    @echo "{{measures}}"
    mkdir -p results docs
    {{bin_dir}}/ipc-parent sweep --sizes {{sizes}} --transport {{transports}} --duration {{duration}} --rounds {{rounds}} --save results/sweep-{{build_mode}}.json {{ARGS}}
    {{bin_dir}}/ipc-parent chart results/sweep-{{build_mode}}.json --output docs/sweep-chart.svg

# Every wait strategy beside uds, pipe and ipc-channel: back to back and paced 1 ms apart, quiet and with 2 busy processes (release); saves results/wait-load<N>-pace<P>.json
waits *ARGS:
    cargo build --release --bins
    @echo "[info] measuring a release build"
    mkdir -p results
    for load in 0 2; do for pace in 0s 1ms; do \
        {{target_dir}}/release/ipc-parent ping-pong --transport shm,uds,pipe,ipc-channel --wait all \
            --pace $pace --load $load --duration {{duration}} --rounds {{rounds}} \
            --save results/wait-load$load-pace$pace.json {{ARGS}}; \
    done; done

# Three shm ping-pong pairs at once on one machine (WAIT: spin, yield or block): the rate of each pair shows whether they share the cores fairly
fairness wait="spin" *ARGS:
    cargo build --release --bins
    @echo "[info] measuring a release build"
    for i in 1 2 3; do \
        {{target_dir}}/release/ipc-parent ping-pong --transport shm --wait {{wait}} --duration {{duration}} \
            --rounds 1 --name fair$i-$$ {{ARGS}} | grep completed & \
    done; wait

# One-way streaming (STREAM_SIZES, COUNT): msgs/s and MB/s per transport (framed, and bare for the kernel ones) and size beside the ring between two threads and memcpy; saves results/stream-<mode>.json, draws docs/stream-chart.svg
stream *ARGS: build
    @echo "{{measures}}"
    mkdir -p results docs
    {{bin_dir}}/ipc-parent stream --sizes {{stream_sizes}} {{count_flag}} --transport {{transports}} --rounds {{rounds}} --save results/stream-{{build_mode}}.json {{ARGS}}
    {{bin_dir}}/ipc-parent chart results/stream-{{build_mode}}.json --output docs/stream-chart.svg

# N client processes against one server, for every N of the list: shm selector, thread per client, async beside uds (poll loop, threads) and ipc-channel; saves results/clients-<mode>.json
clients n="1,4,16" *ARGS: build
    @echo "{{measures}}"
    mkdir -p results
    {{bin_dir}}/ipc-parent clients {{n}} --duration {{duration}} --rounds {{rounds}} --save results/clients-{{build_mode}}.json {{ARGS}}

# One publisher, N subscriber processes, for every N of the list: a shmlink topic, N shmlink channels, N uds sockets (and iceoryx2 with FEATURES=iceoryx2); saves results/fanout-<mode>.json, draws docs/fanout-chart.svg
fanout n="1,2,4,8,16" *ARGS: build
    @echo "{{measures}}"
    mkdir -p results docs
    {{bin_dir}}/ipc-parent fanout {{n}} --duration {{duration}} --rounds {{rounds}} --save results/fanout-{{build_mode}}.json {{ARGS}}
    {{bin_dir}}/ipc-parent chart results/fanout-{{build_mode}}.json --output docs/fanout-chart.svg

# shmlink through two zenoh bridges (each in a mount namespace of its own: needs root) against zenoh's own round trip and put stream, and TCP; saves results/bridge-<mode>.json, draws docs/bridge-chart.svg
bridge *ARGS:
    @echo "{{measures}}"
    cargo build {{cargo_flags}} -p shmlink-zenoh
    cargo build {{cargo_flags}} -p shmlink-harness --features zenoh
    mkdir -p results docs
    {{bin_dir}}/ipc-parent bridge --duration {{duration}} --rounds {{rounds}} --save results/bridge-{{build_mode}}.json {{ARGS}}
    {{bin_dir}}/ipc-parent chart results/bridge-{{build_mode}}.json --output docs/bridge-chart.svg

# Seed 003's workloads in C against libshmlink (compiled by the run), beside the same in Rust and a pipe in C; saves results/c-api-<mode>.json, draws docs/c-api-chart.svg
c-api *ARGS:
    @echo "{{measures}}"
    cargo build {{cargo_flags}} -p shmlink-c
    cargo build {{cargo_flags}} --bin ipc-parent
    mkdir -p results docs
    {{bin_dir}}/ipc-parent c-api --duration 1s --rounds {{rounds}} --save results/c-api-{{build_mode}}.json {{ARGS}}
    {{bin_dir}}/ipc-parent chart results/c-api-{{build_mode}}.json --output docs/c-api-chart.svg

# Run every transport into results/<mode>.json and draw it as an SVG bar chart
chart input=("results/" + build_mode + ".json") output="docs/ipc-chart.svg": build
    mkdir -p results "$(dirname {{output}})"
    test -f {{input}} || { echo "{{measures}}"; {{bin_dir}}/ipc-parent ping-pong --transport {{transports}} --duration {{duration}} --rounds {{rounds}} --json > {{input}}; }
    {{bin_dir}}/ipc-parent chart {{input}} --output {{output}}

# Measure the documents of the results page (release, with fanout's iceoryx2 row and the bridge, ROUNDS rounds, options after the name go to every run, e.g. --pin) into docs/results/, then render the page and draw docs/fanout-chart.svg
results *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release --bins --features shmlink-harness/iceoryx2,shmlink-harness/zenoh
    cargo build --release -p shmlink-zenoh -p shmlink-c
    echo "[info] measuring a release build"
    bin={{target_dir}}/release/ipc-parent
    # `report --check` refuses a document started at a load of half the CPUs or more: before
    # each run, wait (up to 5 minutes) for the one-minute load that the run before left to fall.
    quiet() {
        waited=0
        while load=$(cut -d' ' -f1 /proc/loadavg) && awk -v l="$load" -v c="$(nproc)" 'BEGIN { exit !(l >= c / 2) }'; do
            [ $waited -ge 300 ] && { echo "[info] load still $load after 5 minutes: measuring anyway"; return; }
            [ $((waited % 15)) = 0 ] && echo "[progress] waiting for the load ($load) to fall below half the CPUs"
            sleep 5; waited=$((waited + 5))
        done
    }
    quiet; $bin ping-pong --rounds {{rounds}} --duration {{duration}} --save docs/results/ping-pong.json {{ARGS}}
    quiet; $bin ping-pong --transport floor,shm,raw-sync --message raw --size 56 --rounds {{rounds}} --duration {{duration}} --save docs/results/ping-pong-raw56.json {{ARGS}}
    quiet; $bin sweep --rounds {{rounds}} --save docs/results/sweep.json {{ARGS}}
    quiet; $bin stream --rounds {{rounds}} --save docs/results/stream.json {{ARGS}}
    quiet; $bin clients 1,4,16 --rounds {{rounds}} --duration 1s --save docs/results/clients.json {{ARGS}}
    quiet; $bin fanout 1,2,4,8,16 --rounds {{rounds}} --duration 1s --save docs/results/fanout.json {{ARGS}}
    $bin chart docs/results/fanout.json --output docs/fanout-chart.svg
    quiet; $bin bridge --rounds {{rounds}} --duration 1s --save docs/results/bridge.json {{ARGS}}
    $bin chart docs/results/bridge.json --output docs/bridge-chart.svg
    quiet; $bin c-api --rounds {{rounds}} --duration 1s --save docs/results/c-api.json {{ARGS}}
    $bin chart docs/results/c-api.json --output docs/c-api-chart.svg
    $bin report

# Render docs/results/README.md from the documents in docs/results/ (--check: fail if it differs)
report *ARGS: build
    {{bin_dir}}/ipc-parent report {{ARGS}}

# Run the unit, conformance and end-to-end tests
test:
    cargo test {{cargo_flags}}

# Check formatting and run clippy with warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings

# Run the criterion benchmarks
bench:
    cargo bench

# List shared-memory mappings and sockets this project left behind (there should be none)
leftovers:
    @ls -1 /dev/shm 2>/dev/null | grep '^shmlink-' || echo "none in /dev/shm"
    @ls -1 "${XDG_RUNTIME_DIR:-/tmp}" /tmp 2>/dev/null | grep '^shmlink-' || echo "no sockets or rendezvous files"

# Stress both wait strategies: 10,000,000 frames per direction through a 4 KiB ring, print the counts
stress frames="10000000":
    SHMLINK_STRESS_FRAMES={{frames}} cargo test --release -p shmlink --test it -- stress:: --nocapture --test-threads=1

# List shmlink segments with owner and state, and remove those whose creator is dead (--dry-run lists only)
clean-shm *ARGS:
    cargo run --release --quiet --bin shmlink-clean -- {{ARGS}}

# Model-check the ring's publish protocol and the sleep/wake handshake with loom
loom:
    RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR={{target_dir}}/loom cargo test -p shmlink --release --lib loom

# Fuzz each target (hostile_segment, listener_slots, json_recv; or TARGET alone) for N seconds from its seeds in fuzz/corpus/ (needs cargo-fuzz; FUZZ_WORK: where new inputs go, default fuzz/work)
fuzz secs="180" target="":
    #!/usr/bin/env bash
    set -euo pipefail
    cd fuzz
    work=${FUZZ_WORK:-work}
    targets="{{target}}"
    [ -n "$targets" ] || targets=$(RUSTC_BOOTSTRAP=1 cargo fuzz list)
    for t in $targets; do
        # A listener case runs an op per byte, some of which wait a millisecond: shorter inputs.
        case $t in listener_slots) len=512 ;; *) len=4096 ;; esac
        mkdir -p "$work/$t"
        echo "fuzz $t for {{secs}} s"
        # New inputs go to the first directory; the seeds in corpus/ are only read. A crash, a
        # case slower than 10 s or over 2 GiB is a finding (written to artifacts/<target>/).
        RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" "$work/$t" "corpus/$t" -- \
            -max_total_time={{secs}} -timeout=10 -rss_limit_mb=2048 -max_len=$len -print_final_stats=1
    done
