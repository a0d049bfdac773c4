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
examples are, the subscriber polling receive(), yielding the CPU between polls (a sample that
no subscriber took is sent again). Plus the JSON ping-pong of a Python client against the Rust
json_server example, alone and paired (in alternating slices with a Python peer, --slices).
Rows are interleaved round by round; at the end a table per workload is printed as the
harness prints its own.

Every row runs in two fresh processes, the measuring side and its peer (for the Rust row, the
Python client and the server); this process only starts them and waits for the rate, with a
deadline (warm-up + duration + --slack) and a check every POLL_S that both are alive. A row
whose peer exits, whose side raises, or that runs past its deadline fails: it is reported, its
processes are killed and its channels removed, and the run goes on (a row that failed
--give-up-after times is not run again). The document is written after every round (a
temporary file renamed over --save), so a run cut short keeps the rounds it finished.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.util
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

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

# How often the wait for a row's rate checks that its processes are alive, in seconds.
POLL_S = 0.1
# How long a side waits for the other to be done with the channel before closing its end, how
# long this process gives a row's processes to exit once the rate is in, and how long it waits
# for the rate once the peer has exited normally (it exits only after the stop message, so
# the rate is due at once).
LINGER_S = 10
REAP_S = 10
AFTER_PEER_S = 5
# How long a peer may take to start (connect, open its services) before its row fails.
START_S = 20


def unique(tag):
    return f"pybench-{os.getpid()}-{tag}-{time.monotonic_ns() % 10**9}"


class RowFailed(Exception):
    """A row that did not give a rate: why, in a sentence."""


# --- transports: each a duplex with send/recv of bytes, and send_obj/recv_obj ----------------
#
# A transport is made in this process; `parent()` and `child()` open its two ends in the row's
# two processes; `close()` closes an end there; `cleanup(killed)` runs here once both processes
# are gone and removes what a killed process leaves behind.


class Transport:
    name = "?"
    # The module the contender needs, if any: without it the contender is not run.
    module = None

    @classmethod
    def missing(cls):
        """Why the contender cannot run here (its module is not installed), or None."""
        if cls.module and importlib.util.find_spec(cls.module) is None:
            return f"{cls.module} is not installed"
        return None

    def cleanup(self, killed):
        pass


class Shm(Transport):
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

    def cleanup(self, killed):
        reclaim_prefix(self.id)


class Pipe(Transport):
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


class Queue(Transport):
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
    module = "faster_fifo"

    def __init__(self, size):
        import faster_fifo
        import faster_fifo_reduction  # noqa: F401  (lets multiprocessing pass the queues)

        self.q = tuple(faster_fifo.Queue(max_size_bytes=8 << 20) for _ in range(2))

    def recv_many(self):
        return self.rx.get_many(max_messages_to_get=1000)

    def close(self):
        pass


class Zmq(Transport):
    name = "pyzmq ipc://"
    module = "zmq"

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

    def cleanup(self, killed):
        # Here, once both ends are closed: an end that removed the socket file itself could
        # find it gone (the other removed it first).
        try:
            os.unlink(self.addr[6:])
        except FileNotFoundError:
            pass


class Iceoryx2(Transport):
    name = "iceoryx2"
    module = "iceoryx2"

    def __init__(self, size):
        self.id = unique("iox")
        self.size = max(size, 256)

    def _open(self, out, inp):
        import iceoryx2 as iox2

        self.iox2 = iox2
        self.node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)

        def service(tag):
            # Both processes open or create the two services at once; the one that loses the
            # race to create may be told so (the service is being created) and tries again.
            deadline = time.monotonic() + START_S
            while True:
                try:
                    return (
                        self.node.service_builder(iox2.ServiceName.new(f"{self.id}/{tag}"))
                        .publish_subscribe(iox2.Slice[ctypes.c_uint8])
                        .enable_safe_overflow(False)
                        .subscriber_max_buffer_size(256)
                        .open_or_create()
                    )
                except iox2.PublishSubscribeOpenOrCreateError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

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
        while True:
            sample = self.pub.loan_slice_uninit(len(b))
            if b:
                ctypes.memmove(sample.payload().as_ptr(), b, len(b))
            # The number of subscribers that got it: none, now and then while the publisher
            # updates its connections, even with a subscriber there (its full buffer retried).
            if sample.assume_init().send():
                return
            os.sched_yield()

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

    def cleanup(self, killed):
        # A killed process leaves its node's resources; a live node removes those of dead ones.
        if killed:
            bounded(_iceoryx2_cleanup, REAP_S)


CONTENDERS = [Shm, Pipe, Queue, FasterFifo, Zmq, Iceoryx2]

# (name, title, kind, size)
WORKLOADS = [
    ("json", "JSON ping-pong", "ping-pong", None),
    ("raw-64", "raw 64 B round trips", "ping-pong", 64),
    ("raw-64k", "raw 64 KiB round trips", "ping-pong", 65536),
    ("stream-128", "one-way stream, 128 B", "stream", 128),
    ("stream-4k", "one-way stream, 4 KiB", "stream", 4096),
]

RUST = "shmlink, Python client of a Rust server"
# The Python client of the Rust server and of a Python peer in alternating slices of one row,
# so that both sides of their ratio see the same state of the machine.
PAIRED = "Rust server and Python peer, paired slices"


def reclaim_prefix(prefix):
    """Removes the channels and listeners whose names start with `prefix` and whose creator is
    gone. Called once every process that could make one has been reaped: a zero-sized one left
    is then from a creator killed between making it and sizing it, which the library judges
    stale only after `INIT_GRACE` (a live creator looks the same for a few microseconds), so it
    is removed here at once."""
    for seg in shmlink._shmlink.scan()[0]:
        if not seg["name"].startswith(prefix):
            continue
        if shmlink._shmlink.reclaim(seg["name"]) == "alive" and seg["size"] == 0 and not seg["ready"]:
            try:
                os.unlink(f"/dev/shm/shmlink-{seg['name']}")
            except FileNotFoundError:
                pass


def _iceoryx2_cleanup():
    import iceoryx2 as iox2

    iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc).try_cleanup_dead_nodes()


def bounded(f, seconds):
    """Runs `f()` in a forked process, killed if it runs past `seconds`."""
    p = CTX.Process(target=f, daemon=True)
    p.start()
    p.join(seconds)
    if p.is_alive():
        p.kill()
        p.join(REAP_S)


# --- a row's two processes -------------------------------------------------------------------


def the_peer(t, kind, size, ready, ended, done):
    """The peer: echoes (ping-pong) or counts (stream) until the stop message; then it says it
    has ended and keeps its end open until the measuring side is done (a transport may drop
    what an end sent just before it closed)."""
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
        finished = False
        while not finished:
            for b in many() if many else [t.recv()]:
                if not b:
                    finished = True
                    break
                n += 1
        t.send(str(n).encode())
    ended.set()
    if not done.wait(LINGER_S):
        raise RuntimeError(f"the measuring side was not done {LINGER_S} s after the stop message")
    t.close()


def the_side(t, kind, size, duration, warmup, ready, ended, done):
    """The measuring side: the rate of round trips (ping-pong) or of messages the peer counted
    (stream) over `duration` seconds after `warmup`."""
    t.parent()
    if not ready.wait(START_S):
        raise RuntimeError(f"the peer was not ready within {START_S} s")
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
        rate = round_trip_rate(send, recv, msg, duration)
        send(stop)
        if not ended.wait(LINGER_S):
            raise RuntimeError(f"the peer did not take the stop message within {LINGER_S} s")
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
        if got != n:
            raise RuntimeError(f"the peer counted {got} messages of {n} sent")
    done.set()
    t.close()
    return rate


def the_rust_client(name, duration, warmup):
    """The Python client of the Rust json_server: the rate of JSON round trips."""
    with shmlink.connect(name, timeout=START_S) as ch:
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
        ch.send_json({"op": "stop"}, timeout=LINGER_S)
        ch.recv_json(timeout=LINGER_S)
    return n / (now - start)


def orphan_guard():
    """In a row's process: to be killed when the benchmark's process dies, so that nothing is
    left waiting for a peer after a benchmark that was killed."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def in_child(conn, body, args):
    """A row's forked process: runs `body(*args)` and sends ("ok", its result) or ("error",
    why) on `conn`."""
    orphan_guard()
    try:
        result = body(*args)
    except BaseException as e:  # noqa: BLE001 - handed to the benchmark's process
        try:
            conn.send(("error", f"{type(e).__name__}: {e}"))
        except OSError:
            pass
        os._exit(1)
    conn.send(("ok", result))


def how(code):
    """How a process ended, from its exit code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Proc:
    """One of a row's processes: a forked `multiprocessing` process or a `subprocess.Popen`."""

    def __init__(self, what, p, conn=None):
        # `conn`: where the process reports an error of its own, if it does.
        self.what, self.p, self.conn = what, p, conn

    @property
    def sentinel(self):
        return getattr(self.p, "sentinel", None)

    def exitcode(self):
        """None while it runs."""
        return self.p.poll() if isinstance(self.p, subprocess.Popen) else self.p.exitcode

    def why(self):
        """What the process reported before it ended, as ": message", or ""."""
        try:
            if self.conn is not None and self.conn.poll(0):
                status, value = self.conn.recv()
                if status == "error":
                    return f": {value}"
        except (EOFError, OSError):
            pass
        return ""

    def kill(self):
        try:
            self.p.kill()
        except (OSError, ValueError):
            pass

    def reap(self, seconds):
        """Waits up to `seconds` for it to end; whether it did."""
        if isinstance(self.p, subprocess.Popen):
            try:
                self.p.wait(seconds)
            except subprocess.TimeoutExpired:
                return False
            return True
        self.p.join(seconds)
        return self.p.exitcode is not None


def await_rate(conn, side, peers, limit):
    """The rate `side` sends on `conn`. Waits at most `limit` seconds, and checks every POLL_S
    that `side` and its `peers` are alive: a peer that exits before the rate comes (other than
    normally, after the stop message), a side that ends without one, a side that reports an
    error, or the deadline, raises RowFailed. `peers`: (Proc, stopped) pairs, `stopped()`
    saying whether the peer took the stop message (None: it exits only after it)."""
    deadline = time.monotonic() + limit
    ended = set()
    while True:
        now = time.monotonic()
        if now >= deadline:
            if ended:
                raise RowFailed(f"the peer exited normally, but no rate came within {AFTER_PEER_S} s")
            raise RowFailed(f"no rate within {limit:.0f} s; the {side.what} and the peer still run")
        sentinels = [p.sentinel for p in (side, *(p for p, _ in peers)) if p.sentinel is not None]
        multiprocessing.connection.wait([conn, *sentinels], timeout=min(POLL_S, deadline - now))
        if conn.poll(0):
            try:
                status, value = conn.recv()
            except EOFError:
                status, value = "error", "it closed its pipe"
            if status == "ok":
                return value
            raise RowFailed(f"the {side.what} failed: {value}")
        code = side.exitcode()
        if code is not None:
            if conn.poll(0):
                continue
            raise RowFailed(f"the {side.what} {how(code)} without a rate")
        for peer, stopped in peers:
            code = peer.exitcode()
            if code is None or peer in ended:
                continue
            if code != 0:
                raise RowFailed(f"the {peer.what} {how(code)} before the rate came{peer.why()}")
            if stopped is not None and not stopped():
                raise RowFailed(f"the {peer.what} {how(code)} before the stop message")
            ended.add(peer)
            deadline = min(deadline, time.monotonic() + AFTER_PEER_S)


def finish(procs, failed):
    """Ends a row's processes: each gets REAP_S to exit (at once if the row failed), and is
    killed after. Returns whether one had to be killed, and the complaint to make if the row
    had not failed (a process that did not exit after its rate came), or None."""
    killed, complaint = False, None
    for p in procs:
        if failed and p.exitcode() is None:
            p.kill()
            killed = True
        if not p.reap(REAP_S):
            p.kill()
            p.reap(REAP_S)
            killed = True
            complaint = complaint or f"the {p.what} did not exit within {REAP_S} s of the rate"
        elif not failed and p.exitcode() != 0:
            complaint = complaint or f"the {p.what} {how(p.exitcode())} after the rate{p.why()}"
    return killed, complaint


# --- rows --------------------------------------------------------------------------------


class Row:
    """A workload and a contender (a Transport class; RUST, the Python client of the Rust
    json_server; or PAIRED, that client and a Python one in alternating slices)."""

    def __init__(self, workload, contender, server=None, slices=10):
        self.workload, self.contender, self.server, self.slices = workload, contender, server, slices
        self.name, self.title, self.kind, self.size = workload
        self.label = contender if contender in (RUST, PAIRED) else contender.name
        self.key = (self.name, self.label)
        self.paired = contender == PAIRED

    def measure(self, duration, warmup, slack):
        """The row's rate (PAIRED: the rates of its slices); RowFailed if it gave none within
        warm-up + duration + slack."""
        limit = warmup + duration + slack
        if self.contender == RUST:
            return measure_rust(self.server, duration, warmup, limit)
        if self.contender == PAIRED:
            return measure_paired(self.server, duration, warmup, self.slices, limit)
        return measure_transport(self.contender, self.kind, self.size, duration, warmup, limit)


def measure_transport(cls, kind, size, duration, warmup, limit):
    t = cls(size or 64)
    ready, ended, done = CTX.Event(), CTX.Event(), CTX.Event()
    side_r, side_w = CTX.Pipe(duplex=False)
    peer_r, peer_w = CTX.Pipe(duplex=False)
    peer = Proc(
        "peer",
        CTX.Process(target=in_child, args=(peer_w, the_peer, (t, kind, size, ready, ended, done)), daemon=True),
        peer_r,
    )
    side = Proc(
        "measuring side",
        CTX.Process(
            target=in_child,
            args=(side_w, the_side, (t, kind, size, duration, warmup, ready, ended, done)),
            daemon=True,
        ),
    )
    started, failed = [], True
    try:
        for p in (peer, side):
            p.p.start()
            started.append(p)
        side_w.close()
        peer_w.close()
        rate = await_rate(side_r, side, [(peer, ended.is_set)], limit)
        failed = False
    finally:
        killed, complaint = finish(started, failed)
        t.cleanup(killed)
        side_r.close()
        peer_r.close()
    if complaint:
        raise RowFailed(complaint)
    return rate


def read_ready(server, limit):
    """Waits for the server's `ready` line, at most `limit` seconds, checking that it runs."""
    deadline = time.monotonic() + limit
    fd = server.p.stdout.fileno()
    got = b""
    while b"\n" not in got:
        now = time.monotonic()
        if now >= deadline:
            raise RowFailed(f"the server did not print ready within {limit:.0f} s")
        if multiprocessing.connection.wait([fd], timeout=min(POLL_S, deadline - now)):
            chunk = os.read(fd, 256)
            if not chunk:
                code = server.p.wait(REAP_S)
                raise RowFailed(f"the server {how(code)} before it was ready{server.why()}")
            got += chunk
    if got.split(b"\n", 1)[0].strip() != b"ready":
        raise RowFailed(f"the server printed {got!r} instead of ready")


class ServerProc(Proc):
    """The Rust server: its error is the last line it wrote to standard error."""

    def __init__(self, p, stderr):
        super().__init__("server", p)
        self.stderr = stderr

    def why(self):
        try:
            self.stderr.seek(0)
            lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""


def start_server(server_bin, name):
    """The Rust json_server bound to `name`, its standard error in a temporary file."""
    if not server_bin or not os.path.exists(server_bin):
        raise RowFailed(f"no server at {server_bin}")
    stderr = tempfile.TemporaryFile()
    try:
        p = subprocess.Popen(
            [server_bin, name], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, preexec_fn=orphan_guard
        )
    except BaseException:
        stderr.close()
        raise
    return ServerProc(p, stderr)


def measure_rust(server_bin, duration, warmup, limit):
    name = unique("rust")
    server = start_server(server_bin, name)
    side_r, side_w = CTX.Pipe(duplex=False)
    side = Proc(
        "client",
        CTX.Process(target=in_child, args=(side_w, the_rust_client, (name, duration, warmup)), daemon=True),
    )
    started, failed = [server], True
    try:
        read_ready(server, START_S)
        side.p.start()
        started.insert(0, side)
        side_w.close()
        rate = await_rate(side_r, side, [(server, None)], limit)
        failed = False
    finally:
        killed, complaint = finish(started, failed)
        reclaim_prefix(name)
        server.p.stdout.close()
        server.stderr.close()
        side_r.close()
    if complaint:
        raise RowFailed(complaint)
    return rate


def json_burst(send, recv, seconds):
    """JSON round trips per second through `send` and `recv` for `seconds`."""
    return round_trip_rate(send, recv, dict(MESSAGE), seconds)


def round_trip_rate(send, recv, msg, seconds):
    """Round trips of `msg` per second through `send` and `recv` for `seconds`."""
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(16):
            send(msg)
            recv()
        n += 16
        now = time.perf_counter()
        if now >= end:
            return n / (now - start)


def the_paired_side(t, name, duration, warmup, slices, ready, ended, done):
    """The JSON ping-pong with a Python peer (over `t`) and with the Rust server (`name`) in
    alternating slices, `slices` of each, each `duration / slices` seconds, the one that goes
    first alternating too: the rates of the slices, {"python": [...], "rust": [...]}."""
    t.parent()
    if not ready.wait(START_S):
        raise RuntimeError(f"the peer was not ready within {START_S} s")
    with shmlink.connect(name, timeout=START_S) as ch:
        ends = {"python": (t.send_obj, t.recv_obj), "rust": (ch.send_json, ch.recv_json)}
        for send, recv in ends.values():
            json_burst(send, recv, warmup)
        out = {"python": [], "rust": []}
        for i in range(slices):
            for who in ("python", "rust") if i % 2 == 0 else ("rust", "python"):
                out[who].append(json_burst(*ends[who], duration / slices))
        ch.send_json({"op": "stop"}, timeout=LINGER_S)
        ch.recv_json(timeout=LINGER_S)
    t.send_obj(None)
    if not ended.wait(LINGER_S):
        raise RuntimeError(f"the peer did not take the stop message within {LINGER_S} s")
    done.set()
    t.close()
    return out


def measure_paired(server_bin, duration, warmup, slices, limit):
    name = unique("pair")
    t = Shm(64)
    server = start_server(server_bin, name)
    ready, ended, done = CTX.Event(), CTX.Event(), CTX.Event()
    side_r, side_w = CTX.Pipe(duplex=False)
    peer_r, peer_w = CTX.Pipe(duplex=False)
    peer = Proc(
        "peer",
        CTX.Process(target=in_child, args=(peer_w, the_peer, (t, "ping-pong", None, ready, ended, done)), daemon=True),
        peer_r,
    )
    side = Proc(
        "client",
        CTX.Process(
            target=in_child,
            args=(side_w, the_paired_side, (t, name, duration, warmup, slices, ready, ended, done)),
            daemon=True,
        ),
    )
    started, failed = [server], True
    try:
        read_ready(server, START_S)
        for p in (peer, side):
            p.p.start()
            started.insert(0, p)
        side_w.close()
        peer_w.close()
        # Both ends measured for `duration` each.
        result = await_rate(side_r, side, [(peer, ended.is_set), (server, None)], limit + duration + warmup)
        failed = False
    finally:
        killed, complaint = finish(started, failed)
        t.cleanup(killed)
        reclaim_prefix(name)
        server.p.stdout.close()
        server.stderr.close()
        side_r.close()
        peer_r.close()
    if complaint:
        raise RowFailed(complaint)
    return result


# --- the run -------------------------------------------------------------------------------


def duration_text(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """A line per row as it ends (its round, its place, its rate or why it failed) and the time
    the run has left, from the time per row so far."""

    def __init__(self, total, width=24, out=None):
        self.total, self.width, self.out = total, width, out or sys.stderr
        self.done, self.started = 0, time.monotonic()

    def row(self, r, rounds, row, rate=None, error=None):
        self.done += 1
        per_row = (time.monotonic() - self.started) / self.done
        left = duration_text(per_row * (self.total - self.done))
        if error is not None:
            what = f"FAILED: {error}"
        elif isinstance(rate, dict):
            what = f"{times(statistics.median(slice_ratios(rate)))} (median of its slices' time ratios)"
        else:
            what = f"{rate:>12,.0f}/s"
        print(
            f"round {r}/{rounds} row {self.done}/{self.total}, {left} left: {row.name:<11} {row.label:<{self.width}} {what}",
            file=self.out,
            flush=True,
        )

    def skip(self, r, rounds, row):
        self.total -= 1
        print(
            f"round {r}/{rounds}: {row.name:<11} {row.label:<{self.width}} skipped: it failed before",
            file=self.out,
            flush=True,
        )


def run(rows, rounds, duration, warmup, slack, give_up_after=2, on_round=None, progress=None):
    """Measures every row once per round, interleaved (the order rotated each round). Returns
    {row key: {round: rate}} and the failures ({workload, contender, round, error}). A failed
    row is reported and the run goes on; one that failed `give_up_after` times is not run
    again. `on_round(round, rates, failures)` is called after every round."""
    rates = {row.key: {} for row in rows}
    failures = []
    failed = {row.key: 0 for row in rows}
    progress = progress or Progress(len(rows) * rounds, max((len(row.label) for row in rows), default=0))
    for r in range(1, rounds + 1):
        k = (r - 1) % len(rows) if rows else 0
        for row in rows[k:] + rows[:k]:
            if give_up_after and failed[row.key] >= give_up_after:
                progress.skip(r, rounds, row)
                continue
            try:
                rate = row.measure(duration, warmup, slack)
            except RowFailed as e:
                failed[row.key] += 1
                failures.append({"workload": row.name, "contender": row.label, "round": r, "error": str(e)})
                progress.row(r, rounds, row, error=str(e))
            else:
                rates[row.key][r] = rate
                progress.row(r, rounds, row, rate=rate)
        if on_round:
            on_round(r, rates, failures)
    return rates, failures


def per_round_ratio(a, b):
    """The median of a[r] / b[r] over the rounds both have, and best(a) / best(b)."""
    both = [a[r] / b[r] for r in a if r in b and b[r] > 0]
    median = statistics.median(both) if both else None
    best = max(a.values()) / max(b.values()) if a and b and max(b.values()) > 0 else None
    return median, best


def workload_documents(rows, rates):
    """The `workloads` of the document: per workload, a result per row that has a rate
    (`rounds`: its rates in round order; `failed_rounds`: the rounds it failed, if any)."""
    out = []
    seen = []
    for row in rows:
        if row.name not in seen:
            seen.append(row.name)
    for wname in seen:
        ws = [row for row in rows if row.name == wname]
        results = []
        for row in ws:
            got = rates[row.key]
            if not got or row.paired:
                continue
            result = {
                "contender": row.label,
                "rounds": [got[r] for r in sorted(got)],
                "median": statistics.median(got.values()),
                "best": max(got.values()),
            }
            results.append(result)
        out.append(
            {
                "name": wname,
                "title": ws[0].title,
                "kind": ws[0].kind,
                "size": ws[0].size,
                "unit": "round trips/s" if ws[0].kind == "ping-pong" else "messages/s",
                "results": results,
            }
        )
    return out


def slice_ratios(pair):
    """Round-trip time with the Rust server ÷ with the Python peer, slice by slice: the
    Python peer's rate ÷ the Rust server's."""
    return [p / r for p, r in zip(pair["python"], pair["rust"]) if r > 0]


def paired_document(rows, rates):
    """The paired row's rounds, with every slice's rates and time ratio, and the median, best
    and spread of the ratios over all of them (None without a paired row)."""
    row = next((row for row in rows if row.paired), None)
    if row is None:
        return None
    got = rates[row.key]
    rounds = [{"round": r, **got[r], "ratios": slice_ratios(got[r])} for r in sorted(got)]
    ratios = sorted(x for r in rounds for x in r["ratios"])
    best = (
        max(x for r in rounds for x in r["python"]) / max(x for r in rounds for x in r["rust"]) if rounds else None
    )
    return {
        "what": "JSON round-trip time of a Python client with the Rust json_server ÷ with a Python peer, "
        "from adjacent slices of one process's ping-pong with both",
        "slices_per_round": row.slices,
        "rounds": rounds,
        "median": statistics.median(ratios) if ratios else None,
        "best": best,
        "spread": [ratios[0], ratios[-1]] if ratios else None,
    }


def write_atomically(path, text):
    """Writes `text` to `path` through a temporary file beside it, renamed over it: a reader
    sees the old document or the new one, never part of one."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- tables, as the harness prints them -----------------------------------------------------


def table(columns, rows):
    """A Markdown pipe table padded to line up; a column named `>x` is right-aligned."""
    right = [c.startswith(">") for c in columns]
    header = [c.lstrip(">") for c in columns]
    widths = [max([len(header[i]), 3] + [len(r[i]) for r in rows]) for i in range(len(columns))]

    def line(cells):
        return "|" + "".join(f" {c:>{w}} |" if ri else f" {c:<{w}} |" for c, w, ri in zip(cells, widths, right)) + "\n"

    rule = "|" + "".join(f" {'-' * (w - 1)}: |" if ri else f" {'-' * w} |" for w, ri in zip(widths, right)) + "\n"
    return line(header) + rule + "".join(line(r) for r in rows)


def whole(x):
    return f"{x:,.0f}"


def times(x):
    return "-" if x is None else f"{x:.2f}x"


# (workload, contender prefix, goal): shmlink's rate ÷ the contender's, at least the goal.
TARGETS = [
    ("json", "multiprocessing.Pipe", 5.0),
    ("json", "pyzmq", 2.0),
    ("json", "iceoryx2", 1.0),
    ("raw-64", "multiprocessing.Pipe", 5.0),
    ("raw-64", "pyzmq", 2.0),
    ("raw-64", "iceoryx2", 1.0),
    ("stream-128", "faster-fifo", 3.0),
    ("stream-128", "iceoryx2", 1.0),
]
# The Python client of the Rust server: its round-trip time ÷ Python <-> Python's, at most this.
RUST_TARGET = 1.2


def tables(doc, rates):
    """What the run prints when it ends: per workload, each contender's median, best, shmlink's
    rate ÷ it (median of the per-round ratios, and best ÷ best), its rounds and failures; then
    the targets."""
    run = doc["run"]
    out = [
        f"machine: {run['machine']['cpu']} ({run['machine']['cores']} CPUs); Python {doc['python']}, "
        f"JSON through {doc['json_codec']}; commit {run['commit'][:12]}; load average "
        f"{run['load_average']:.2f} at the start; {doc['rounds_done']} of {run['rounds']} rounds, "
        f"{doc['duration_s']} s per row and round\n"
    ]
    failed_rounds = {}
    for f in doc["failures"]:
        failed_rounds.setdefault((f["workload"], f["contender"]), []).append(f["round"])
    for w in doc["workloads"]:
        out.append(f"**{w['title']}** ({w['unit']}):\n")
        ours = rates.get((w["name"], "shmlink"), {})
        cells = []
        labels = [r["contender"] for r in w["results"]]
        labels += [c for (wn, c) in failed_rounds if wn == w["name"] and c not in labels]
        for label in labels:
            got = rates.get((w["name"], label), {})
            vs = ""
            if label != "shmlink" and ours and got:
                m, b = per_round_ratio(ours, got)
                vs = f"{times(m)} / {times(b)}"
            cells.append(
                [
                    label,
                    whole(statistics.median(got.values())) if got else "-",
                    whole(max(got.values())) if got else "-",
                    vs,
                    " ".join(whole(got[r]) for r in sorted(got)),
                    ",".join(str(r) for r in failed_rounds.get((w["name"], label), [])),
                ]
            )
        out.append(
            table(
                ["contender", ">median", ">best", ">shmlink ÷ it (median per round / best)", ">rounds", "failed in round"],
                cells,
            )
        )
    targets = []
    for wname, prefix, goal in TARGETS:
        ours = rates.get((wname, "shmlink"))
        theirs = next((v for (wn, c), v in rates.items() if wn == wname and c.startswith(prefix)), None)
        if ours and theirs:
            m, b = per_round_ratio(ours, theirs)
            targets.append([f"{wname}: shmlink ≥ {goal}x {prefix}", times(m), times(b), met(m, goal, True)])
    ours, rust = rates.get(("json", "shmlink")), rates.get(("json", RUST))
    if ours and rust:
        # Round-trip time is 1 / rate: the Rust row's time ÷ shmlink's is shmlink's rate ÷ its.
        m, b = per_round_ratio(ours, rust)
        targets.append(
            [f"json: Python client of a Rust server, round-trip time ≤ {RUST_TARGET}x Python <-> Python", times(m), times(b), met(m, RUST_TARGET, False)]
        )
    pair = doc.get("paired")
    if pair and pair["median"] is not None:
        lo, hi = pair["spread"]
        targets.append(
            [
                f"json, paired slices: Rust server round-trip time ≤ {RUST_TARGET}x Python peer "
                f"({sum(len(r['ratios']) for r in pair['rounds'])} slice pairs, {lo:.2f}x-{hi:.2f}x)",
                times(pair["median"]),
                times(pair["best"]),
                met(pair["median"], RUST_TARGET, False),
            ]
        )
    if targets:
        out.append("Targets (per-round ratios of the rows' rates; the Rust row's as a time ratio):\n")
        out.append(table(["target", ">median per round", ">best / best", "met (median)"], targets))
    if doc["failures"]:
        out.append(f"{len(doc['failures'])} failed row(s):\n")
        out.append(
            table(
                ["round", "workload", "contender", "why"],
                [[str(f["round"]), f["workload"], f["contender"], f["error"]] for f in doc["failures"]],
            )
        )
    for n in doc["not_run"]:
        out.append(f"not run: {n['contender']} ({n['why']})\n")
    return "\n".join(out)


def met(x, goal, at_least):
    if x is None:
        return "-"
    return "yes" if (x >= goal if at_least else x <= goal) else "no"


# --- the machine and the document -----------------------------------------------------------


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


def cpu_times():
    """(steal, total) jiffies of all CPUs, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def commit():
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0.5, help="seconds measured per row and round")
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--only", default="", help="comma-separated contender names to run")
    ap.add_argument("--workloads", default="", help="comma-separated workload names to run")
    ap.add_argument("--server", default=str(ROOT / "target/release/examples/json_server"))
    ap.add_argument("--profile", default="release", help="how the extension was built, for the record")
    ap.add_argument("--slack", type=float, default=30, help="seconds a row may take past its warm-up and duration")
    ap.add_argument("--give-up-after", type=int, default=2, help="failures after which a row is not run again (0: never)")
    ap.add_argument(
        "--slices",
        type=int,
        default=10,
        help="slices of each side in the paired row (the Rust server and a Python peer alternating); 0: no such row",
    )
    ap.add_argument("--save", help="write the JSON document here (after every round)")
    ap.add_argument("--json", action="store_true", help="print the JSON document on standard output")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    load = os.getloadavg()[0]
    wanted = [c for c in CONTENDERS if not args.only or c.name in args.only.split(",")]
    not_run = [{"contender": c.name, "why": c.missing()} for c in wanted if c.missing()]
    contenders = [c for c in wanted if not c.missing()]
    workloads = [w for w in WORKLOADS if not args.workloads or w[0] in args.workloads.split(",")]
    rows = [Row(w, c) for w in workloads for c in contenders]
    if any(w[0] == "json" for w in workloads) and (not args.only or "rust" in args.only.split(",") or "shmlink" in args.only.split(",")):
        if os.path.exists(args.server):
            rows.append(Row(WORKLOADS[0], RUST, args.server))
            if args.slices:
                rows.append(Row(WORKLOADS[0], PAIRED, args.server, args.slices))
        else:
            not_run.append({"contender": RUST, "why": f"no server at {args.server}"})
    for n in not_run:
        print(f"bench: not run: {n['contender']} ({n['why']})", file=sys.stderr)
    guess = len(rows) * args.rounds * (args.warmup + args.duration + 0.5)
    print(
        f"bench: {len(rows)} rows x {args.rounds} rounds of {args.warmup} + {args.duration} s: about "
        f"{duration_text(guess)}; load average {load:.2f}",
        file=sys.stderr,
        flush=True,
    )
    codecs = codec_rates()
    steal = []
    load_averages = []
    mark = [cpu_times()]

    def document(rates, failures, rounds_done):
        return {
            "run": {
                # As typed, from the directory it was run in.
                "command": " ".join(["python", sys.argv[0], *argv]),
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
            "workloads": workload_documents(rows, rates),
            "paired": paired_document(rows, rates),
            "rounds_done": rounds_done,
            "complete": rounds_done == args.rounds,
            "round_load_averages": load_averages,
            "round_steal_percent": steal,
            "failures": failures,
            "not_run": not_run,
        }

    def on_round(r, rates, failures):
        s, t = cpu_times()
        s0, t0 = mark[0]
        mark[0] = (s, t)
        steal.append(round(100 * (s - s0) / (t - t0), 2) if t > t0 else 0.0)
        load_averages.append(os.getloadavg()[0])
        if args.save:
            write_atomically(args.save, json.dumps(document(rates, failures, r), indent=2) + "\n")

    rates, failures = run(rows, args.rounds, args.duration, args.warmup, args.slack, args.give_up_after, on_round)
    doc = document(rates, failures, args.rounds)
    print(tables(doc, rates))
    if args.save:
        print(f"wrote {args.save}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
