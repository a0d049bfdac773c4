"""The Python package against real processes: every method, the errors, a killed peer, the GIL
released during waits, Ctrl-C, batch receives against a sender that never stops, numpy buffers,
JSON errors, Rust peers on both sides, and nothing left in /dev/shm. Every wait has a timeout,
and a thread's failure fails its test (the `threads` fixture)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import shmlink
from conftest import ROOT, read_line, reap

# A child that connects to the channel named by argv[1] and sends back every message it gets,
# until the creator closes the channel (or fails after 30 s without one).
ECHO = """
import sys, shmlink
with shmlink.connect(sys.argv[1], timeout=10) as ch:
    print("connected", flush=True)
    while True:
        try:
            msg = ch.recv(timeout=30)
        except shmlink.Disconnected:
            break
        ch.send(msg, timeout=30)
"""


def start_echo(spawn, name):
    child = spawn(ECHO, name)
    assert read_line(child) == "connected"
    return child


def test_send_and_recv_every_form_with_a_child(name, spawn):
    with shmlink.Channel.create(name, capacity=1 << 16) as ch:
        child = start_echo(spawn, name)
        ch.send(b"plain", timeout=10)
        assert ch.recv(timeout=10) == b"plain"
        ch.try_send(bytearray(b"try"))
        assert ch.recv(timeout=10) == b"try"
        ch.send(memoryview(b"view"), timeout=10)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert ch.try_recv() == b"view"
                break
            except shmlink.Empty:
                assert time.monotonic() < deadline
        ch.send_json({"n": 1, "list": [1, 2.5, "three"], "none": None}, timeout=10)
        assert ch.recv_json(timeout=10) == {"n": 1, "list": [1, 2.5, "three"], "none": None}
        ch.try_send_json(["x"])
        deadline = time.monotonic() + 10
        while True:
            try:
                assert ch.try_recv_json() == ["x"]
                break
            except shmlink.Empty:
                assert time.monotonic() < deadline
        buf = bytearray(64)
        ch.send(b"into", timeout=10)
        assert ch.recv_into(buf, timeout=10) == 4
        assert buf[:4] == b"into"
        ch.send(b"into-now", timeout=10)
        view = memoryview(buf)[8:]
        deadline = time.monotonic() + 10
        while True:
            try:
                assert ch.try_recv_into(view) == 8
                break
            except shmlink.Empty:
                assert time.monotonic() < deadline
        assert buf[8:16] == b"into-now"
        # Longer than a frame (64 KiB ring, about 32 KiB frames): sent in fragments.
        big = os.urandom(1 << 20)
        ch.send(big, timeout=10)
        assert ch.recv(timeout=10) == big
        assert ch.peer_pid == child.pid
        assert ch.is_peer_connected()
        assert ch.capacity == 1 << 16
        assert ch.max_frame < ch.capacity
        assert ch.backend == "shm"
        assert ch.name == name
    assert ch.closed
    assert child.wait(timeout=10) == 0


def test_empty_full_and_timeout(name):
    with shmlink.Channel.create(name, capacity=4096) as a, shmlink.connect(name) as b:
        with pytest.raises(shmlink.Empty):
            b.try_recv()
        started = time.monotonic()
        with pytest.raises(shmlink.Timeout):
            b.recv(timeout=0.2)
        assert time.monotonic() - started >= 0.2
        with pytest.raises(shmlink.Timeout):
            b.recv_json(timeout=0.01)
        frame = b"x" * 1000
        with pytest.raises(shmlink.Full):
            for _ in range(100):
                a.try_send(frame)
        with pytest.raises(shmlink.Timeout):
            a.send(frame, timeout=0.1)
        # Everything sent before the Full arrives, in order.
        got = 0
        while True:
            try:
                assert b.try_recv() == frame
                got += 1
            except shmlink.Empty:
                break
        assert got > 0


def test_batches_go_in_order_and_stop_where_the_ring_is_full(name, threads):
    for backend in ("shm", "ipc-channel"):
        n = f"{name}-{backend}"
        with shmlink.Endpoint.create(n, capacity=1 << 16, backend=backend) as a:
            with shmlink.Endpoint.connect(n, timeout=10) as b:
                with pytest.raises(shmlink.Empty):
                    b.try_recv_batch(8)
                with pytest.raises(shmlink.Timeout):
                    b.recv_batch(8, timeout=0.05)
                assert b.recv_batch(0) == []
                msgs = [i.to_bytes(4, "little") * (i % 7) for i in range(500)]
                msgs.append(os.urandom(100_000))  # longer than a frame of a 64 KiB ring
                went = []
                threads.start(lambda: went.append(a.send_batch(msgs, timeout=10)))
                got = []
                while len(got) < len(msgs):
                    batch = b.recv_batch(64, timeout=10)
                    assert 1 <= len(batch) <= 64
                    got.extend(batch)
                threads.join()
                assert went == [len(msgs)]
                assert got == msgs
                assert a.send_batch([bytearray(b"x"), memoryview(b"yz")], timeout=10) == 2
                got = []
                while len(got) < 2:
                    got.extend(b.recv_batch(8, timeout=10))
                assert got == [b"x", b"yz"]
                with pytest.raises(TypeError):
                    a.send_batch(["text"], timeout=10)
    with shmlink.Channel.create(name, capacity=4096) as a, shmlink.connect(name) as b:
        many = [bytes([i % 256]) * 100 for i in range(1000)]
        went = a.try_send_batch(many)
        assert 0 < went < len(many)
        with pytest.raises(shmlink.Full):
            a.try_send_batch(many[went:])
        with pytest.raises(shmlink.Timeout):
            a.send_batch(many[went:], timeout=0.05)
        got = []
        while True:
            try:
                got.extend(b.try_recv_batch(1000))
            except shmlink.Empty:
                break
        assert got == many[:went]


def test_try_send_batch_waits_for_a_thread_inside_a_call_on_the_channel(name, threads):
    # As try_send does: another thread's call holds the channel for one slice at most, and
    # a try_ form waits for it rather than calling the ring full.
    with shmlink.Channel.create(name, capacity=1 << 16) as a, shmlink.connect(name) as b:
        state = []

        def busy():
            state.append("entered")
            assert a.recv(timeout=10) == b"wake"
            state.append("returned")

        threads.start(busy)
        deadline = time.monotonic() + 10
        while not state:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        time.sleep(0.1)  # in its wait by now, holding the channel a slice at a time
        went = [a.try_send_batch([b"x", b"y"]) for _ in range(5)]
        # Every call ran while the other thread was still inside its recv.
        assert state == ["entered"]
        b.send(b"wake", timeout=10)
        threads.join()
        assert state == ["entered", "returned"]
        assert went == [2] * 5
        got = []
        while len(got) < 10:
            got.extend(b.recv_batch(64, timeout=10))
        assert got == [b"x", b"y"] * 5


def test_errors_map_to_exception_classes(name):
    assert issubclass(shmlink.Timeout, shmlink.ShmlinkError)
    assert issubclass(shmlink.PeerGone, shmlink.ShmlinkError)
    with pytest.raises(shmlink.InvalidName):
        shmlink.Channel.create("no/slash")
    with pytest.raises(shmlink.NotFound):
        shmlink.connect(name)
    with pytest.raises(shmlink.NotFound):
        shmlink.connect(name, timeout=0.1)
    with pytest.raises(shmlink.InvalidConfig):
        shmlink.Channel.create(name, capacity=1000)
    with pytest.raises(ValueError):
        shmlink.Channel.create(name, wait="sometimes")
    with shmlink.Channel.create(name) as a:
        with pytest.raises(shmlink.AlreadyExists):
            shmlink.Channel.create(name)
        b = shmlink.connect(name)
        with pytest.raises(shmlink.AlreadyConnected):
            shmlink.connect(name)
        with pytest.raises(ValueError):
            b.recv(timeout=-1)
        with pytest.raises(TypeError):
            a.send("text is not bytes")
        a.send(b"0123456789", timeout=5)
        small = bytearray(4)
        with pytest.raises(shmlink.TooLarge) as info:
            b.recv_into(small, timeout=5)
        assert (info.value.len, info.value.max) == (10, 4)
        with pytest.raises(TypeError):
            b.recv_into(b"read-only", timeout=0)
        a.send(b"not json", timeout=5)
        with pytest.raises(shmlink.JsonError):
            b.recv_json(timeout=5)
        b.close()
        b.close()
        with pytest.raises(shmlink.Closed):
            b.recv(timeout=5)
        with pytest.raises(shmlink.Disconnected) as info:
            a.recv(timeout=5)
        assert info.value.channel == name
        with pytest.raises(shmlink.Disconnected):
            a.send(b"to nobody", timeout=5)


def test_recv_into_writes_the_bytes_of_any_writable_contiguous_buffer(name):
    import numpy as np

    with shmlink.Channel.create(name, capacity=1 << 16) as a, shmlink.connect(name) as b:
        # Arrays of any dtype go and come as their bytes.
        words = np.array([1, 2, 3, 0xDEADBEEF], dtype=np.uint32)
        a.send(words, timeout=5)
        into = np.zeros(4, dtype=np.uint32)
        assert b.recv_into(into, timeout=5) == 16
        assert (into == words).all()
        floats = np.array([0.5, -2.25, np.pi])
        a.send(floats, timeout=5)
        got = np.empty(3)
        assert b.recv_into(got, timeout=5) == 24
        assert (got == floats).all()
        # A shorter message fills the first bytes; a 2-D C-ordered array is one run of bytes.
        a.send(b"\x01\x00\x00\x00\x02\x00", timeout=5)
        into = np.full(2, 0xFFFFFFFF, dtype=np.uint32)
        assert b.recv_into(into, timeout=5) == 6
        assert into.tolist() == [1, 0xFFFF0002]
        a.send(bytes(range(8)), timeout=5)
        grid = np.zeros((2, 4), dtype=np.uint8)
        assert b.recv_into(grid, timeout=5) == 8
        assert grid.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
        a.send(b"abcd", timeout=5)
        view = memoryview(bytearray(8)).cast("I")
        deadline = time.monotonic() + 10
        while True:
            try:
                assert b.try_recv_into(view) == 4
                break
            except shmlink.Empty:
                assert time.monotonic() < deadline
        assert view.tobytes()[:4] == b"abcd"
        # Longer than the buffer's bytes (not its items).
        a.send(b"0123456789", timeout=5)
        with pytest.raises(shmlink.TooLarge) as info:
            b.recv_into(np.zeros(2, dtype=np.uint32), timeout=5)
        assert (info.value.len, info.value.max) == (10, 8)
        # Refused before anything is received: the message stays for the next call.
        a.send(b"kept", timeout=5)
        strided = np.zeros(8, dtype=np.uint32)[::2]
        with pytest.raises(ValueError, match="C-contiguous"):
            b.recv_into(strided, timeout=5)
        with pytest.raises(ValueError, match="C-contiguous"):
            b.try_recv_into(np.zeros((2, 3), order="F"))
        frozen = np.zeros(4, dtype=np.uint32)
        frozen.setflags(write=False)
        with pytest.raises(TypeError, match="writable"):
            b.recv_into(frozen, timeout=5)
        with pytest.raises(TypeError):
            b.recv_into(object(), timeout=5)
        assert b.recv(timeout=5) == b"kept"
        # A strided array is sent as its items in order.
        a.send(np.arange(8, dtype=np.uint32)[::2], timeout=5)
        assert b.recv(timeout=5) == np.array([0, 2, 4, 6], dtype=np.uint32).tobytes()


# Both ends in one process, with the JSON codec `JSON_CODEC` names: every JSON failure is a
# JsonError carrying the codec's message, its exception as the cause and (decoding) the message.
JSON_ERRORS = """
import json, sys, time
if sys.argv[2] == "json":
    sys.modules["orjson"] = None  # the standard json module, as where orjson is not installed
import shmlink
assert shmlink.JSON_CODEC == sys.argv[2], shmlink.JSON_CODEC
if shmlink.JSON_CODEC == "orjson":
    import orjson
    dumps, loads = orjson.dumps, orjson.loads
else:
    dumps, loads = json.dumps, json.loads
assert issubclass(shmlink.JsonError, shmlink.ShmlinkError)
assert issubclass(shmlink.JsonError, ValueError)

def codec_error(f, *args):
    try:
        f(*args)
    except Exception as e:
        return e
    raise AssertionError(f"{f} accepted {args}")

def expect(f, *args):
    try:
        f(*args)
    except shmlink.JsonError as e:
        return e
    raise AssertionError(f"{f} raised no JsonError")

with shmlink.Channel.create(sys.argv[1]) as a, shmlink.connect(sys.argv[1]) as b:
    for bad in (b"not json", b'{"open": ', b"\\xff"):
        a.send(bad, timeout=5)
        e = expect(b.recv_json, 5)
        want = codec_error(loads, bad)
        assert str(e) == str(want), (str(e), str(want))
        assert type(e.__cause__) is type(want), e.__cause__
        assert e.data == bad
    a.send(b"[1]", timeout=5)
    a.send(b"nope", timeout=5)
    deadline = time.monotonic() + 10
    while True:
        try:
            assert b.try_recv_json() == [1]
            break
        except shmlink.Empty:
            assert time.monotonic() < deadline
    e = expect(b.try_recv_json)
    assert e.data == b"nope"
    for obj in (object(), {"set": {1, 2}}):
        for send in (a.send_json, a.try_send_json):
            e = expect(send, obj)
            want = codec_error(dumps, obj)
            assert str(e) == str(want), (str(e), str(want))
            assert type(e.__cause__) is type(want)
            assert e.data is None
    # Nothing went for them, and the channel goes on.
    try:
        b.try_recv()
        raise AssertionError("a message that failed to encode was sent")
    except shmlink.Empty:
        pass
    a.send_json({"ok": [1, 2.5, None]}, timeout=5)
    assert b.recv_json(timeout=5) == {"ok": [1, 2.5, None]}
print("ok")
"""


@pytest.mark.parametrize("codec", ["orjson", "json"])
def test_what_is_not_json_raises_json_error_with_the_codecs_message(name, spawn, codec):
    child = spawn(JSON_ERRORS, name, codec)
    out, err = reap(child, timeout=30)
    assert child.returncode == 0, err
    assert out.strip() == "ok"


def test_a_killed_peer_is_peer_gone(name, spawn):
    with shmlink.Channel.create(name) as ch:
        child = spawn(
            "import sys, shmlink, time\n"
            "ch = shmlink.connect(sys.argv[1], timeout=10)\n"
            "ch.send(b'before', timeout=10)\n"
            "print('sent', flush=True)\n"
            "time.sleep(60)\n",
            name,
        )
        assert read_line(child) == "sent"
        child.kill()
        child.wait(timeout=10)
        # What it sent before dying is still delivered, then the death is reported.
        assert ch.recv(timeout=10) == b"before"
        with pytest.raises(shmlink.PeerGone) as info:
            ch.recv(timeout=10)
        assert info.value.pid == child.pid
        # A send goes into the ring while there is room; once none is left, it learns.
        with pytest.raises(shmlink.PeerGone):
            for _ in range(1000):
                ch.send(b"x" * 4096, timeout=10)


def test_a_peer_that_closes_is_disconnected(name, spawn):
    with shmlink.Channel.create(name) as ch:
        child = spawn(
            "import sys, shmlink\n"
            "with shmlink.connect(sys.argv[1], timeout=10) as ch:\n"
            "    ch.send_json({'bye': True}, timeout=10)\n",
            name,
        )
        assert ch.recv_json(timeout=10) == {"bye": True}
        with pytest.raises(shmlink.Disconnected):
            ch.recv(timeout=10)
        assert child.wait(timeout=10) == 0


def test_a_blocked_recv_releases_the_gil(name, threads):
    with shmlink.Channel.create(name) as a, shmlink.connect(name) as b:
        counted = []
        done = threading.Event()

        def count():
            n = 0
            stop = time.monotonic() + 10
            while not done.is_set() and time.monotonic() < stop:
                n += 1
            counted.append(n)

        def recv():
            try:
                with pytest.raises(shmlink.Timeout):
                    b.recv(timeout=0.5)
            finally:
                done.set()

        # Alone, the counter gets about as many loops in the same time; while `recv` waits it
        # must get a good share of that: had the wait kept the GIL, it would get none until the
        # waiter's timeout.
        try:
            threads.start(recv)
            time.sleep(0.05)  # the receiver is in its wait
            threads.start(count)
            threads.join()
        finally:
            done.set()
        assert counted[0] > 10_000
        a.close()


def test_recv_in_one_thread_send_in_another(name, threads):
    with shmlink.Channel.create(name) as a, shmlink.connect(name) as b:
        received = []
        threads.start(lambda: received.extend(b.recv(timeout=10) for _ in range(3)))
        for i in range(3):
            time.sleep(0.01)
            a.send(bytes([i]), timeout=10)
        threads.join()
        assert received == [b"\x00", b"\x01", b"\x02"]


def test_ctrl_c_interrupts_a_blocked_recv(name, spawn):
    with shmlink.Channel.create(name) as ch:
        child = spawn(
            "import sys, shmlink\n"
            "ch = shmlink.connect(sys.argv[1], timeout=10)\n"
            "print('waiting', flush=True)\n"
            "try:\n"
            "    ch.recv(timeout=30)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n"
            "    ch.close()\n",
            name,
        )
        assert read_line(child) == "waiting"
        time.sleep(0.2)  # in recv by now
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=10)
        assert out.strip() == "interrupted", err
        assert child.returncode == 0
        # Within a few slices, not at some later timeout.
        assert time.monotonic() - sent < 5
        with pytest.raises(shmlink.Disconnected):
            ch.recv(timeout=5)


def test_listener_accepts_clients_and_selector_waits(name, spawn):
    client = (
        "import sys, shmlink\n"
        "with shmlink.connect(sys.argv[1], timeout=10) as ch:\n"
        "    ch.send_json({'who': sys.argv[2]}, timeout=10)\n"
        "    assert ch.recv_json(timeout=10) == {'hello': sys.argv[2]}\n"
    )
    with shmlink.Listener.bind(name, capacity=1 << 16, max_clients=4) as listener:
        assert listener.max_clients == 4
        with pytest.raises(shmlink.Empty):
            listener.try_accept()
        with pytest.raises(shmlink.Timeout):
            listener.accept(timeout=0.05)
        children = [spawn(client, name, who) for who in ("ann", "bob")]
        channels = [listener.accept(timeout=10) for _ in children]
        selector = shmlink.Selector()
        served = set()
        while len(served) < 2:
            for i in selector.wait(channels, timeout=10):
                if i in served:
                    continue
                who = channels[i].recv_json(timeout=10)["who"]
                channels[i].send_json({"hello": who}, timeout=10)
                served.add(i)
        for child in children:
            assert child.wait(timeout=10) == 0
        assert sorted(selector.poll(channels)) == [0, 1]  # both closed (in a rotating order)
        for ch in channels:
            with pytest.raises(shmlink.Disconnected):
                ch.recv(timeout=10)
            ch.close()
    assert listener.closed


def test_endpoint_on_both_backends(name):
    for backend in ("shm", "ipc-channel"):
        n = f"{name}-{backend}"
        with shmlink.Endpoint.create(n, backend=backend) as a:
            with shmlink.Endpoint.connect(n, timeout=10) as b:
                assert a.backend == b.backend == backend
                b.send(b"ping", timeout=10)
                assert a.recv(timeout=10) == b"ping"
                a.send_json({"pong": 1}, timeout=10)
                assert b.recv_json(timeout=10) == {"pong": 1}
                with pytest.raises(shmlink.Empty):
                    a.try_recv()
    with pytest.raises(ValueError):
        shmlink.Endpoint.create(name, backend="carrier-pigeon")


def test_rust_server_python_client(name, rust_examples):
    server = subprocess.Popen(
        [rust_examples / "json_server", name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert read_line(server) == "ready"
        with shmlink.connect(name, timeout=10) as ch:
            for i in range(100):
                ch.send_json({"op": "add", "a": i, "b": 1}, timeout=10)
                assert ch.recv_json(timeout=10) == {"sum": i + 1, "from": "rust"}
            ch.send_json({"op": "stop"}, timeout=10)
            assert ch.recv_json(timeout=10) == {"stopped": True}
        assert server.wait(timeout=10) == 0
    finally:
        reap(server, timeout=0)


def test_python_server_rust_clients(name, rust_examples):
    script = os.path.join(os.path.dirname(__file__), "..", "examples", "server.py")
    server = subprocess.Popen([sys.executable, script, name], stdout=subprocess.PIPE, text=True)
    clients = []
    try:
        assert read_line(server) == "ready"
        clients = [
            subprocess.Popen([rust_examples / "json_client", name, "200"], stdout=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        for c in clients:
            out, _ = c.communicate(timeout=30)
            assert c.returncode == 0 and out.strip() == "ok 200"
        stopper = subprocess.run(
            [rust_examples / "json_client", name, "1", "--stop"], capture_output=True, text=True, timeout=30
        )
        assert stopper.returncode == 0, stopper.stderr
        assert server.wait(timeout=10) == 0
    finally:
        for p in [server, *clients]:
            reap(p, timeout=0)


def test_python_m_shmlink_lists_and_cleans(name, spawn):
    # A creator that dies leaves its channel behind; the cleaner removes it.
    child = spawn(
        "import sys, os, shmlink\n"
        "ch = shmlink.Channel.create(sys.argv[1])\n"
        "os._exit(0)\n",
        name,
    )
    child.wait(timeout=10)
    assert os.path.exists(f"/dev/shm/shmlink-{name}")
    listing = subprocess.run(
        [sys.executable, "-m", "shmlink", "--dry-run", name], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0
    assert "stale" in listing.stdout and name in listing.stdout
    assert os.path.exists(f"/dev/shm/shmlink-{name}")
    cleaned = subprocess.run([sys.executable, "-m", "shmlink", name], capture_output=True, text=True, timeout=30)
    assert cleaned.returncode == 0
    assert "removed" in cleaned.stdout
    assert not os.path.exists(f"/dev/shm/shmlink-{name}")


def test_the_readme_examples_run_as_written():
    """Every ```python block of python/README.md runs as it is (they run both ends in one process)."""
    import re

    from conftest import ROOT, shm_entries

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "python" / "README.md").read_text(), re.S)
    assert blocks, "python/README.md has no python block"
    before = set(shm_entries(""))
    for block in blocks:
        exec(compile(block, "python/README.md", "exec"), {})
    # Only the examples' own names: other processes on the machine make and remove channels.
    text = "".join(blocks)
    left = [e for e in set(shm_entries("")) - before if f'"{e.removeprefix("shmlink-")}"' in text]
    assert not left, f"left in /dev/shm: {left}"


# A batch receive against a sender that never lets up: the Rust example byte_stream sends 1-byte
# messages as fast as the ring takes them. A 16 MiB ring holds about a million of them, more than
# a receiver takes in the slice a batch call is allowed, so each call below ends by its bound
# with the ring still full of messages.
STREAM_CAPACITY = 1 << 24
HUGE = 1 << 62


@contextlib.contextmanager
def endless_stream(name, rust_examples):
    """A channel that `byte_stream` keeps full, once it has filled it; closed and the sender
    reaped on the way out."""
    ch = shmlink.Channel.create(name, capacity=STREAM_CAPACITY)
    sender = subprocess.Popen([rust_examples / "byte_stream", name, "20"], stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(sender) == "streaming"
        assert read_line(sender) == "full"
        yield ch
    finally:
        ch.close()
        reap(sender)


def test_a_batch_receive_from_a_sender_that_never_stops_ends_within_its_bound(name, rust_examples):
    with endless_stream(name, rust_examples) as ch:
        calls = {
            "recv_batch(timeout=0.05)": lambda: ch.recv_batch(HUGE, timeout=0.05),
            "recv_batch()": lambda: ch.recv_batch(HUGE),
            "try_recv_batch": lambda: ch.try_recv_batch(HUGE),
            "recv_batch(timeout=0)": lambda: ch.recv_batch(HUGE, timeout=0),
        }
        for what, call in calls.items():
            started = time.monotonic()
            got = call()
            took = time.monotonic() - started
            assert took < 1.0, f"{what} took {took:.2f} s"
            # At most a ring's worth (16-byte frames), and not for want of messages.
            assert 1 <= len(got) <= STREAM_CAPACITY // 16, what
            assert set(got) == {b"*"}
            assert ch.try_recv() == b"*", what


def test_a_batch_receive_from_a_sender_that_never_stops_lets_other_threads_run(name, rust_examples, threads):
    with endless_stream(name, rust_examples) as ch:
        ticks = [time.monotonic()]
        done = threading.Event()

        # The two threads on two CPUs: a ticker woken on its own CPU when the GIL is let go
        # only for a moment finds it taken back, every time; a handed-over GIL waits for it.
        cpus = os.sched_getaffinity(0)

        def tick():
            os.sched_setaffinity(0, {max(cpus)})
            while not done.wait(0.001):
                ticks.append(time.monotonic())

        os.sched_setaffinity(0, {min(cpus)})
        try:
            threads.start(tick)
            try:
                end = time.monotonic() + 3
                calls = 0
                while time.monotonic() < end:
                    ch.recv_batch(HUGE)
                    calls += 1
            finally:
                done.set()
                threads.join()
        finally:
            os.sched_setaffinity(0, cpus)
        ticks.append(time.monotonic())
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    # A thread that waits for the GIL asks for it after a switch interval (5 ms unless set), and
    # a batch hands it over after holding it for two: about 10 ms between ticks. Had a batch kept
    # the GIL for the whole call, or let it go so briefly that the waiter found it taken again
    # (its interval then starts anew), the ticker would wait for whole calls, often many in a row.
    bound = max(0.1, 20 * sys.getswitchinterval())
    assert max(gaps) < bound, f"the ticker waited {max(gaps):.2f} s for the GIL ({calls} calls)"


def test_ctrl_c_interrupts_batch_receives_from_a_sender_that_never_stops(name, rust_examples, spawn):
    with endless_stream(name, rust_examples) as ch:
        # Another process sends the SIGINT (a thread of this one would need the GIL) and says
        # when (CLOCK_MONOTONIC, the same clock in every process).
        killer = spawn(
            "import os, signal, sys, time\n"
            "time.sleep(0.2)\n"
            "print(time.monotonic(), flush=True)\n"
            "os.kill(int(sys.argv[1]), signal.SIGINT)\n",
            str(os.getpid()),
        )
        with pytest.raises(KeyboardInterrupt):
            end = time.monotonic() + 15
            while time.monotonic() < end:
                ch.recv_batch(HUGE, timeout=5)
        seen = time.monotonic()
        sent = float(read_line(killer))
        assert seen - sent < 1.0, f"Ctrl-C seen {seen - sent:.2f} s after it came"


# A child that receives ctypes Ticks by value and sends each back with its price doubled.
VALUE_ECHO = """
import ctypes, sys, shmlink

class Tick(ctypes.Structure):
    _fields_ = [("price", ctypes.c_uint64), ("qty", ctypes.c_uint32), ("side", ctypes.c_uint32)]

with shmlink.Endpoint.connect(sys.argv[1], timeout=10) as ch:
    print("connected", flush=True)
    while True:
        try:
            tick = ch.recv_value(Tick, timeout=30)
        except shmlink.Disconnected:
            break
        except shmlink.WrongSize as e:
            ch.send_json({"wrong": [e.len, e.expected, e.channel]}, timeout=30)
            continue
        tick.price *= 2
        ch.send_value(tick, timeout=30)
"""


class Tick(__import__("ctypes").Structure):
    import ctypes as _c

    _fields_ = [("price", _c.c_uint64), ("qty", _c.c_uint32), ("side", _c.c_uint32)]


def test_plain_values_go_by_value_between_processes_on_both_backends(name, spawn):
    for backend in ("shm", "ipc-channel"):
        n = f"{name}-{backend}"
        with shmlink.Endpoint.create(n, capacity=1 << 16, backend=backend) as ch:
            child = spawn(VALUE_ECHO, n)
            assert read_line(child) == "connected"
            for i in range(100):
                ch.send_value(Tick(price=100 + i, qty=i, side=i % 2), timeout=10)
                back = ch.recv_value(Tick, timeout=10)
                assert (back.price, back.qty, back.side) == (2 * (100 + i), i, i % 2)
            ch.try_send_value(Tick(price=1, qty=2, side=3))
            deadline = time.monotonic() + 10
            while True:
                try:
                    back = ch.try_recv_value(Tick)
                    break
                except shmlink.Empty:
                    assert time.monotonic() < deadline
            assert (back.price, back.qty, back.side) == (2, 2, 3)
            # A message of another length is WrongSize at the receiver, which keeps working.
            ch.send(b"not a tick", timeout=10)
            assert ch.recv_json(timeout=10) == {"wrong": [10, 16, n]}
            ch.send(b"\x00" * 24, timeout=10)
            with pytest.raises(shmlink.WrongSize) as wrong:
                ch.recv_value(Tick, timeout=10)  # the child's JSON reply is no Tick either
            assert (wrong.value.expected, wrong.value.channel) == (16, n)
            assert wrong.value.len > 16
            ch.send_value(Tick(price=5, qty=0, side=0), timeout=10)
            assert ch.recv_value(Tick, timeout=10).price == 10
            with pytest.raises(shmlink.Timeout):
                ch.recv_value(Tick, timeout=0.05)
        reap(child)


def _shmlink_command(rust_examples):
    """The Rust `shmlink` command, built beside the examples (`cargo build -p shmlink-cli`)."""
    exe = rust_examples.parent / "shmlink"
    if not exe.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "shmlink-cli"], cwd=ROOT, check=True, timeout=900
        )
    return exe


def test_channel_stats_count_exactly_and_python_m_shmlink_prints_what_the_command_prints(name, rust_examples):
    a = shmlink.Channel.create(name, capacity=4096)
    b = shmlink.Channel.connect(name)
    try:
        for i in range(12):
            a.send(bytes([i]) * 10)
        for _ in range(9):
            b.recv()
        b.send(b"back")
        s = a.stats()
        assert s == b.stats()
        assert s["name"] == name and s["kind"] == "channel"
        there, back = s["rings"]
        assert there["direction"] == "creator->connector"
        assert (there["sender"]["messages"], there["sender"]["bytes"]) == (12, 120)
        assert (there["receiver"]["messages"], there["receiver"]["bytes"]) == (9, 90)
        assert there["capacity"] == 4096 and there["fill"] >= 3 * 24
        assert (back["sender"]["messages"], back["receiver"]["messages"]) == (1, 0)

        run = lambda *args: subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
        rust = _shmlink_command(rust_examples)
        py = [sys.executable, "-m", "shmlink"]
        # The same documents and text, from Rust and from Python (nothing moves in between).
        assert json.loads(run(*py, "stat", name, "--json")) == json.loads(run(rust, "stat", name, "--json")) == s
        assert run(*py, "stat", name, "--format", "prometheus") == run(rust, "stat", name, "--format", "prometheus")
        table = run(*py, "stat", name)
        assert "messages           12" in table and table.splitlines()[0] == f"{name} (channel)"
        # Our entry, its age apart (whole seconds: a second may turn between the two runs).
        ours = lambda doc: [{k: v for k, v in e.items() if k != "age_s"} for e in doc["entries"] if e["name"] == name]
        listed = ours(json.loads(run(*py, "list", "--json")))
        assert listed == ours(json.loads(run(rust, "list", "--json"))) and len(listed) == 1
        assert listed[0]["capacity"] == 4096 and listed[0]["fill"] >= 3 * 24
        assert listed[0]["kind"] == "channel" and listed[0]["peers"][0]["pid"] == os.getpid()
        assert name in run(*py, "list")
        assert name not in run(*py, "clean", "--dry-run")
    finally:
        a.close()
        b.close()


def test_list_shows_a_listeners_connections_under_it_as_the_command_does(name, rust_examples):
    run = lambda *args: subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    rust = _shmlink_command(rust_examples)
    py = [sys.executable, "-m", "shmlink"]
    with shmlink.Listener.bind(name, capacity=1 << 16, max_clients=4) as listener:
        got = []
        client = threading.Thread(target=lambda: got.append(shmlink.connect(name, timeout=10)))
        client.start()
        server = listener.accept(timeout=10)
        client.join(timeout=10)
        try:
            ours = lambda doc: [
                {k: v for k, v in e.items() if k != "age_s"} for e in doc["entries"] if e["name"].startswith(name)
            ]
            listed = ours(json.loads(run(*py, "list", "--json")))
            assert listed == ours(json.loads(run(rust, "list", "--json")))
            assert [e["kind"] for e in listed] == ["listener", "channel"]
            assert listed[1]["name"].startswith(f"{name}.{os.getpid()}.") and listed[1]["listener"] == name
            assert "listener" not in listed[0] and [p["pid"] for p in listed[0]["peers"]] == [os.getpid()]
            lines = run(*py, "list").splitlines()
            at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} "))
            assert lines[at + 1].startswith(f"  {listed[1]['name']} ")
            rust_lines = run(rust, "list").splitlines()
            at = next(i for i, line in enumerate(rust_lines) if line.startswith(f"{name} "))
            assert rust_lines[at + 1].startswith(f"  {listed[1]['name']} ")
        finally:
            server.close()
            for ch in got:
                ch.close()


def test_stats_on_the_fallback_say_there_are_none(name):
    ch = shmlink.Endpoint.create(name, backend="ipc-channel")
    try:
        with pytest.raises(shmlink.NotAChannel, match="keeps no counters"):
            ch.stats()
    finally:
        ch.close()
