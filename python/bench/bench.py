"""shmlink against the IPC Python programs use today, the harness's way: interleaved rounds,
median and best of the per-round rates, a JSON document that `ipc-parent report` renders.

    python python/bench/bench.py --rounds 5 --save docs/results/python.json

Build the package in release first (`maturin develop --release`), and the Rust example server
(`cargo build --release -p shmlink-python --example json_server`) for the Rust-server row.

Workloads: JSON ping-pong (a small object, decoded and re-encoded by the echoing peer), raw
64 B and 64 KiB round trips, one-way streams of 128 B and 4 KiB messages. Contenders, each used
its best honest way: shmlink (send/recv, JSON through send_json/recv_json); multiprocessing.Pipe
(send_bytes/recv_bytes, JSON through the same codec); multiprocessing.Queue and faster-fifo
(put/get of the object, pickled as they do; the faster-fifo stream reader takes get_many);
pyzmq PAIR sockets over ipc:// (JSON through the same codec); iceoryx2's Python package, one
publish-subscribe service per direction with a byte-slice payload, written the way its
examples are, the subscriber polling receive(), yielding the CPU between polls. Every row's peer is a
fresh process per round; rows are interleaved round by round.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import faulthandler
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import pathlib

try:
    import orjson

    dumps, loads = orjson.dumps, orjson.loads
except ImportError:  # pragma: no cover
    dumps = lambda o: json.dumps(o, separators=(",", ":")).encode()  # noqa: E731
    loads = json.loads

import shmlink

ROOT = pathlib.Path(__file__).resolve().parents[2]
CTX = mp.get_context("fork")
MESSAGE = {"id": 0, "op": "echo", "name": "sensor-7", "values": [1.5, 2.25, 3.0], "ok": True}
STOP = b""


def unique(tag):
    return f"pybench-{os.getpid()}-{tag}-{time.monotonic_ns() % 10**9}"


# How long a row may run past its warm-up and measured time before the benchmark gives up on it.
ROW_SLACK_S = 60


class Watchdog:
    """Ends the benchmark when a row runs past its deadline: the rows wait in blocking calls
    without timeouts (a timeout would be measured too), so a peer that stopped answering would
    otherwise leave the run waiting for ever. On expiry it kills the row's processes (`procs`,
    which the row fills), runs the row's `cleanups` (removing its channels), prints where every
    thread was, and exits with status 3."""

    def __init__(self, seconds, what):
        self.seconds, self.what, self.procs, self.cleanups = seconds, what, [], []
        self.timer = threading.Timer(seconds, self.fire)
        self.timer.daemon = True

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        return False

    def fire(self):
        print(f"bench: {self.what} ran past {self.seconds:.0f} s; stopping", file=sys.stderr, flush=True)
        for p in self.procs:
            try:
                p.kill()
                p.join(5) if hasattr(p, "join") else p.wait(5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        for cleanup in self.cleanups:
            try:
                cleanup()
            except Exception as e:  # noqa: BLE001 - the run is ending anyway
                print(f"bench: cleanup failed: {e!r}", file=sys.stderr)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(3)


# --- transports: each a duplex with send/recv of bytes, and send_obj/recv_obj ----------------


class Shm:
    name = "shmlink"

    def __init__(self, size):
        self.id = unique("shm")
        self.cap = 1 << 20 if size <= 4096 else 1 << 22

    def parent(self):
        self.ch = shmlink.Channel.create(self.id, capacity=self.cap)

    def child(self):
        self.ch = shmlink.connect(self.id, timeout=10)

    def send(self, b):
        self.ch.send(b)

    def recv(self):
        return self.ch.recv()

    def send_obj(self, o):
        self.ch.send_json(o)

    def recv_obj(self):
        return self.ch.recv_json()

    def close(self):
        self.ch.close()


class Pipe:
    name = "multiprocessing.Pipe"

    def __init__(self, size):
        self.a, self.b = CTX.Pipe()

    def parent(self):
        self.c = self.a

    def child(self):
        self.c = self.b

    def send(self, b):
        self.c.send_bytes(b)

    def recv(self):
        return self.c.recv_bytes()

    def send_obj(self, o):
        self.c.send_bytes(dumps(o))

    def recv_obj(self):
        return loads(self.c.recv_bytes())

    def close(self):
        self.c.close()


class Queue:
    name = "multiprocessing.Queue"

    def __init__(self, size):
        self.q = (CTX.Queue(), CTX.Queue())

    def parent(self):
        self.tx, self.rx = self.q

    def child(self):
        self.rx, self.tx = self.q

    def send(self, b):
        self.tx.put(b)

    def recv(self):
        return self.rx.get()

    send_obj, recv_obj = send, recv

    def recv_many(self):
        return [self.rx.get()]

    def close(self):
        self.tx.close()
        self.tx.join_thread()


class FasterFifo(Queue):
    name = "faster-fifo"

    def __init__(self, size):
        import faster_fifo
        import faster_fifo_reduction  # noqa: F401  (lets multiprocessing pass the queues)

        self.q = tuple(faster_fifo.Queue(max_size_bytes=8 << 20) for _ in range(2))

    def recv_many(self):
        return self.rx.get_many(max_messages_to_get=1000)

    def close(self):
        pass


class Zmq:
    name = "pyzmq ipc://"

    def __init__(self, size):
        self.addr = f"ipc:///tmp/{unique('zmq')}"
        self.big = size >= 65536

    def _sock(self, bind):
        import zmq

        self.ctx = zmq.Context()
        self.s = self.ctx.socket(zmq.PAIR)
        self.s.setsockopt(zmq.LINGER, 1000)
        (self.s.bind if bind else self.s.connect)(self.addr)

    def parent(self):
        self._sock(True)

    def child(self):
        self._sock(False)

    def send(self, b):
        self.s.send(b, copy=not self.big)

    def recv(self):
        return self.s.recv()

    def send_obj(self, o):
        self.s.send(dumps(o))

    def recv_obj(self):
        return loads(self.s.recv())

    def close(self):
        self.s.close()
        self.ctx.term()
        if os.path.exists(self.addr[6:]):
            os.unlink(self.addr[6:])


class Iceoryx2:
    name = "iceoryx2"

    def __init__(self, size):
        self.id = unique("iox")
        self.size = max(size, 256)

    def _open(self, out, inp):
        import iceoryx2 as iox2

        self.iox2 = iox2
        self.node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)

        def service(tag):
            return (
                self.node.service_builder(iox2.ServiceName.new(f"{self.id}/{tag}"))
                .publish_subscribe(iox2.Slice[ctypes.c_uint8])
                .enable_safe_overflow(False)
                .subscriber_max_buffer_size(256)
                .open_or_create()
            )

        self.out_service, self.in_service = service(out), service(inp)
        self.pub = (
            self.out_service.publisher_builder()
            .initial_max_slice_len(self.size)
            .backpressure_strategy(iox2.BackpressureStrategy.RetryUntilDelivered)
            .create()
        )
        self.sub = self.in_service.subscriber_builder().buffer_size(256).create()

    def parent(self):
        self._open("ping", "pong")

    def child(self):
        self._open("pong", "ping")

    def send(self, b):
        sample = self.pub.loan_slice_uninit(len(b))
        if b:
            ctypes.memmove(sample.payload().as_ptr(), b, len(b))
        sample.assume_init().send()

    def recv(self):
        while True:
            sample = self.sub.receive()
            if sample is not None:
                payload = sample.payload()
                return ctypes.string_at(payload.as_ptr(), payload.len())
            # Polling without a pause starves the peer when the processes outnumber the free
            # cores: yield the CPU between polls.
            os.sched_yield()

    def send_obj(self, o):
        self.send(dumps(o))

    def recv_obj(self):
        return loads(self.recv())

    def close(self):
        del self.pub, self.sub, self.out_service, self.in_service, self.node


CONTENDERS = [Shm, Pipe, Queue, FasterFifo, Zmq, Iceoryx2]

# (name, title, kind, size)
WORKLOADS = [
    ("json", "JSON ping-pong", "ping-pong", None),
    ("raw-64", "raw 64 B round trips", "ping-pong", 64),
    ("raw-64k", "raw 64 KiB round trips", "ping-pong", 65536),
    ("stream-128", "one-way stream, 128 B", "stream", 128),
    ("stream-4k", "one-way stream, 4 KiB", "stream", 4096),
]


def peer(t, kind, size, ready):
    """The child: echoes (ping-pong) or counts (stream) until the stop message."""
    t.child()
    ready.set()
    if kind == "ping-pong" and size is None:
        while True:
            o = t.recv_obj()
            if o is None:
                break
            t.send_obj(o)
    elif kind == "ping-pong":
        while True:
            b = t.recv()
            if not b:
                break
            t.send(b)
    else:
        n = 0
        many = getattr(t, "recv_many", None)
        done = False
        while not done:
            for b in many() if many else [t.recv()]:
                if not b:
                    done = True
                    break
                n += 1
        t.send(str(n).encode())
    t.close()


def measure(cls, kind, size, duration, warmup):
    with Watchdog(warmup + duration + ROW_SLACK_S, f"{cls.name} {kind} {size}") as watchdog:
        return measure_row(cls, kind, size, duration, warmup, watchdog)


def measure_row(cls, kind, size, duration, warmup, watchdog):
    t = cls(size or 64)
    ready = CTX.Event()
    child = CTX.Process(target=peer, args=(t, kind, size, ready))
    child.start()
    watchdog.procs.append(child)
    try:
        t.parent()
        if isinstance(t, Shm):
            watchdog.cleanups.append(t.close)
        if not ready.wait(10):
            raise RuntimeError(f"{cls.name}: the peer did not start within 10 s")
        if kind == "ping-pong":
            if size is None:
                msg = dict(MESSAGE)
                send, recv = t.send_obj, t.recv_obj
                stop = None
            else:
                msg = os.urandom(size)
                send, recv = t.send, t.recv
                stop = STOP
            end = time.perf_counter() + warmup
            while time.perf_counter() < end:
                send(msg)
                recv()
            n = 0
            start = time.perf_counter()
            end = start + duration
            while True:
                for _ in range(16):
                    send(msg)
                    recv()
                n += 16
                now = time.perf_counter()
                if now >= end:
                    break
            rate = n / (now - start)
            send(stop)
        else:
            msg = os.urandom(size)
            n = 0
            start = time.perf_counter()
            end = start + duration
            while True:
                for _ in range(64):
                    t.send(msg)
                n += 64
                if time.perf_counter() >= end:
                    break
            t.send(STOP)
            got = int(t.recv())
            rate = got / (time.perf_counter() - start)
            assert got == n, (cls.name, got, n)
        child.join(10)
        return rate
    finally:
        if child.is_alive():
            child.kill()
            child.join(10)
        t.close()


def measure_rust(server_bin, duration, warmup):
    """A Python client of the Rust json_server: the JSON ping-pong."""
    with Watchdog(warmup + duration + ROW_SLACK_S, "rust json_server") as watchdog:
        return measure_rust_row(server_bin, duration, warmup, watchdog)


def measure_rust_row(server_bin, duration, warmup, watchdog):
    name = unique("rust")
    server = subprocess.Popen([server_bin, name], stdout=subprocess.PIPE, text=True)
    watchdog.procs.append(server)
    # The killed server's listener and channels (once this end is closed).
    watchdog.cleanups.append(
        lambda: [shmlink._shmlink.reclaim(c["name"]) for c in shmlink._shmlink.scan()[0] if c["name"].startswith(name)]
    )
    try:
        assert server.stdout.readline().strip() == "ready"
        with shmlink.connect(name, timeout=10) as ch:
            watchdog.cleanups.insert(0, ch.close)
            msg = dict(MESSAGE)
            end = time.perf_counter() + warmup
            while time.perf_counter() < end:
                ch.send_json(msg)
                ch.recv_json()
            n = 0
            start = time.perf_counter()
            end = start + duration
            while True:
                for _ in range(16):
                    ch.send_json(msg)
                    ch.recv_json()
                n += 16
                now = time.perf_counter()
                if now >= end:
                    break
            ch.send_json({"op": "stop"}, timeout=10)
            ch.recv_json(timeout=10)
        server.wait(10)
        return n / (now - start)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=10)


def codec_rates(seconds=0.3):
    """Encode + decode of the JSON message per second, with json and with orjson."""
    out = {}
    codecs = {"json": (lambda o: json.dumps(o).encode(), json.loads)}
    try:
        import orjson as oj

        codecs["orjson"] = (oj.dumps, oj.loads)
    except ImportError:
        pass
    for name, (d, l) in codecs.items():
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(100):
                l(d(MESSAGE))
            n += 100
        out[name] = n / (time.perf_counter() - start)
    return out


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    phys = set()
    for c in range(cores):
        try:
            base = f"/sys/devices/system/cpu/cpu{c}/topology/"
            phys.add((open(base + "physical_package_id").read().strip(), open(base + "core_id").read().strip()))
        except OSError:
            pass
    try:
        online = open("/sys/devices/system/cpu/online").read().strip()
    except OSError:
        online = ""
    u = platform.uname()
    return {
        "cpu": cpu,
        "cores": cores,
        "physical_cores": len(phys),
        "kernel": f"{u.system} {u.release}",
        "online": online,
        "topology": [],
    }


def commit():
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0.5, help="seconds measured per row and round")
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--only", default="", help="comma-separated contender names to run")
    ap.add_argument("--workloads", default="", help="comma-separated workload names to run")
    ap.add_argument("--server", default=str(ROOT / "target/release/examples/json_server"))
    ap.add_argument("--profile", default="release", help="how the extension was built, for the record")
    ap.add_argument("--save", help="write the JSON document here")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    load = os.getloadavg()[0]
    contenders = [c for c in CONTENDERS if not args.only or c.name in args.only.split(",")]
    workloads = [w for w in WORKLOADS if not args.workloads or w[0] in args.workloads.split(",")]
    rows = [(w, c) for w in workloads for c in contenders]
    rust = os.path.exists(args.server) and any(w[0] == "json" for w in workloads)
    if rust:
        rows.append((WORKLOADS[0], "rust"))
    rates = {(w[0], c if c == "rust" else c.name): [] for w, c in rows}
    for r in range(args.rounds):
        # Interleaved: every row once per round, the order rotated each round.
        k = r % len(rows)
        for w, c in rows[k:] + rows[:k]:
            if c == "rust":
                key, rate = (w[0], "rust"), measure_rust(args.server, args.duration, args.warmup)
            else:
                key, rate = (w[0], c.name), measure(c, w[2], w[3], args.duration, args.warmup)
            rates[key].append(rate)
            print(f"round {r + 1}/{args.rounds} {w[0]:<11} {key[1]:<24} {rate:>12,.0f}/s", file=sys.stderr)
    doc_workloads = []
    for name, title, kind, size in workloads:
        results = []
        for (wname, cname), values in rates.items():
            if wname != name:
                continue
            label = "shmlink, Python client of a Rust server" if cname == "rust" else cname
            results.append(
                {"contender": label, "rounds": values, "median": statistics.median(values), "best": max(values)}
            )
        doc_workloads.append(
            {
                "name": name,
                "title": title,
                "kind": kind,
                "size": size,
                "unit": "round trips/s" if kind == "ping-pong" else "messages/s",
                "results": results,
            }
        )
    codecs = codec_rates()
    doc = {
        "run": {
            # As typed, from the directory it was run in.
            "command": " ".join(["python", sys.argv[0], *sys.argv[1:]]),
            "commit": commit(),
            "date": started.isoformat().replace("+00:00", "Z"),
            "profile": args.profile,
            "machine": machine(),
            "pinning": {"pinned": False, "parent": [], "children": []},
            "load_average": load,
            "load": 0,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
        },
        "mode": "python",
        "python": platform.python_version(),
        "json_codec": shmlink.JSON_CODEC,
        "codec_round_trips_per_s": codecs,
        "duration_s": args.duration,
        "workloads": doc_workloads,
    }
    text = json.dumps(doc, indent=2) + "\n"
    if args.save:
        pathlib.Path(args.save).write_text(text)
        print(f"wrote {args.save}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
