#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: fuzz/corpus/<target>/<case>, a few inputs each
that reach the edges a fuzzer finds late (a frame running past the end of the ring, a fragmented
message, a client's channel of 2 GiB rings, a claimer that holds its slot and never publishes).

    python3 fuzz/seeds.py [path/to/shmlink-echo]

The connector's seeds need a real segment header of this build: they copy one from a channel
`shmlink-echo --create` makes (default: target/debug/shmlink-echo, built by `cargo build`).
Rerun after a change of the segment layout.
"""

import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAP = 1024
HEADER_SIZE = 4096
RINGS_OFFSET = 1024
DATA, PAD, FIRST, MORE, LAST = 1, 2, 3, 4, 5


def frame(index, kind, length):
    return struct.pack("<Q", (((index >> 3) & ((1 << 29) - 1)) << 35) | (kind << 32) | length)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def pad8(n):
    return (n + 7) // 8 * 8


def ring_image(frames):
    """A ring region holding `frames` (kind, length) from index 0, each payload filled."""
    region = bytearray(CAP)
    pos = 0
    for n, (kind, length) in enumerate(frames):
        region[pos:pos + 8] = frame(pos, kind, length)
        end = min(CAP, pos + 8 + length)
        region[pos + 8:end] = bytes([0x41 + n]) * (end - pos - 8)
        pos += 8 + pad8(length)
    return bytes(region), pos


def real_header(echo):
    """Bytes 8..408 and 1024..1824 of a fresh channel of CAP-byte rings made by this build."""
    name = "fuzz-seed-%d" % os.getpid()
    path = "/dev/shm/shmlink-" + name
    proc = subprocess.Popen([echo, "--create", "--capacity", str(CAP), name, "spin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if proc.stdout.readline().strip() != b"ready":
            sys.exit("shmlink-echo did not get ready")
        with open(path, "rb") as f:
            data = f.read(HEADER_SIZE)
    finally:
        proc.kill()
        proc.wait()
        if os.path.exists(path):
            os.unlink(path)
    return data[8:408], data[RINGS_OFFSET:RINGS_OFFSET + 800]


def hostile_segment(echo):
    seeds = {}
    # Static image read by the creator: two frames of the most a frame holds, then one that runs
    # 8 bytes past the end of the region (refused as Corrupt).
    most = CAP // 2 - 72
    region, end = ring_image([(DATA, most), (DATA, most), (DATA, 128)])
    seeds["creator-past-the-end"] = bytes([0]) + u64(end) + u64(0) + bytes(16) + region
    region, end = ring_image([(DATA, 0), (DATA, 7), (DATA, most), (PAD, 0)])
    seeds["creator-small-frames"] = bytes([3]) + u64(end) + u64(0) + bytes(16) + region
    # Met by a connector: the real header kept, ring 0 holding frames up to the end.
    fields, rings = real_header(echo)
    rings = bytearray(rings)
    region, end = ring_image([(DATA, most), (DATA, most), (DATA, 120)])
    rings[0:8] = u64(end)  # ring 0's producer index
    seeds["connector-to-the-end"] = bytes([4]) + fields + bytes(rings) + region
    # Read from the second frame on (a ring holds at most its capacity between the indices).
    region, end = ring_image([(DATA, most), (DATA, most), (DATA, 128)])
    rings[0:8] = u64(end)
    rings[128:136] = u64(8 + pad8(most))  # ring 0's consumer index
    seeds["connector-past-the-end"] = bytes([4]) + fields + bytes(rings) + region
    # Streams: whole messages received one way or another, a fragmented message, a batch.
    def op(control, length, fill, total=None):
        out = bytes([control]) + struct.pack("<H", length) + bytes([fill])
        return out + (u64(total) if total is not None else b"")
    seeds["stream-messages"] = bytes([2]) + b"".join(
        op(DATA | 0x10 | (0x20 if n % 3 == 0 else 0) | (0x40 if n % 2 else 0), n * 37 % 400, n)
        for n in range(40))
    seeds["stream-fragments"] = bytes([2]) + (
        op(FIRST, 300, 1, 1200) + op(MORE | 0x10, 300, 2) + op(MORE, 300, 3)
        + op(LAST | 0x10, 300, 4) + op(DATA | 0x10 | 0x40, 8, 5))
    seeds["stream-batch"] = bytes([2]) + b"".join(op(DATA, 24, n) for n in range(12)) + op(
        DATA | 0x10 | 0x20 | 0x40, 24, 7)
    seeds["stream-rewritten"] = bytes([2]) + b"".join(
        op(DATA | 0x10 | 0x80, 64, n) for n in range(20))
    return seeds


def listener_slots():
    # Ops: op, slot, then the op's own bytes (see fuzz_targets/listener_slots.rs).
    CLIENT, ACCEPT, ACCEPT_WAIT = 11, 8, 9
    accept = bytes([ACCEPT, 0, 1, 1])  # sweep, keep
    client = bytes([CLIENT, 0])
    seeds = {}
    seeds["clients-to-the-limit"] = bytes([1]) + (client + accept) * 3 + client
    # A hand-made client channel of 2 GiB rings published in slot 0, then an honest client.
    seeds["huge-client-channel"] = bytes([1, 5, 0, 0, 23]) + accept + client + bytes([ACCEPT_WAIT, 0])
    # Every slot forged active (by init, by us) or in no state, then clients.
    seeds["forged-states"] = bytes([3]) + bytes([0, 0, 2]) + u32(4) + bytes([0, 1, 0]) + u32(0x77) \
        + bytes([1, 2, 4]) + (client + accept) * 3
    # A claimer that holds slot 0's lock with the slot claimed, then lets go.
    seeds["held-claim"] = bytes([1, 6, 0, 0, 1, 0, 1]) + client + accept + bytes([6, 0, 1]) \
        + client + accept + accept
    # The capacity clients read rewritten to 2 GiB, then restored.
    seeds["header-capacity"] = bytes([1, 7, 0, 0]) + client + accept + bytes([ACCEPT_WAIT, 0]) \
        + bytes([7, 0, 1]) + u64(CAP) + client + accept
    # A slot count no listener has, and a doorbell bumped.
    seeds["header-slots"] = bytes([1, 7, 0, 2]) + u32(99999) + client + bytes([7, 0, 3]) + accept
    # A waiting client's slot rewritten (number, start time, counter) under it.
    seeds["rewritten-under-a-client"] = bytes([1]) + client + bytes([2, 0, 0, 5, 3, 0]) + u64(7) \
        + bytes([4, 0]) + u32(1) + accept + bytes([1, 0, 0]) + accept
    return seeds


def json_recv():
    # One message each, decoded as JSON (see fuzz_targets/json_recv.rs).
    return {
        "ping": b'{"sender_id":"5f0c9a3e-1b2d-4e6f-8a7b-9c0d1e2f3a4b",'
                b'"receiver_id":"0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d","sent_at_ms":1764444156789}',
        "escapes": b'["caf\xc3\xa9 \\u00e9 \\ud83d\\ude00 \\n\\t\\"","\\ud800",""]',
        "not-utf8": b'"\xff\xed\xa0\x80"',
        "deep": b"[" * 300 + b"]" * 300,
        "numbers": b"[0,-0,1.5e300,1e400,18446744073709551616,-9223372036854775808,0.1]",
        "object": b'{"a":1,"b":[true,null],"c":{"d":"e"},"a":2}',
    }


def write(target, seeds):
    out = os.path.join(ROOT, "fuzz", "corpus", target)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (target, len(seeds)))


def main():
    echo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "debug",
                                                                "shmlink-echo")
    write("hostile_segment", hostile_segment(echo))
    write("listener_slots", listener_slots())
    write("json_recv", json_recv())


if __name__ == "__main__":
    main()
