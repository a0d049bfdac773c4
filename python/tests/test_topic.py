"""Topics from Python: every form reaches every subscriber, lossless waits, overwrite lags,
history, dropped subscribers, the subscriber limit, subscribers in other processes, and a Rust
publisher with Python subscribers; on shared memory and (where marked) on the ipc-channel
backend."""

import ctypes
import subprocess

import pytest
import shmlink

from conftest import python_child


BACKENDS = ["shm", "ipc-channel"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_form_reaches_every_subscriber(name, backend):
    with shmlink.Publisher.create(name, backend=backend) as pub:
        assert pub.backend == backend
        subs = [shmlink.Subscriber.connect(name, wait="spin") for _ in range(2)]
        assert [sub.backend for sub in subs] == [backend, backend]
        assert pub.subscriber_count == 2
        pub.send(b"bytes")
        pub.send_json({"n": 7})
        pub.send_value(ctypes.c_uint64(42))
        assert pub.send_batch([b"b1", b"b2"]) == 2
        for sub in subs:
            assert sub.recv() == b"bytes"
            assert sub.recv_json() == {"n": 7}
            assert sub.recv_value(ctypes.c_uint64).value == 42
            # A batch receive takes what has arrived (on the fallback each message of a batch
            # travels on its own), at least one message: the rest comes in the next.
            got = sub.recv_batch(8)
            while len(got) < 2:
                more = sub.recv_batch(8, timeout=5)
                assert more, "a batch receive that waited handed nothing"
                got += more
            assert got == [b"b1", b"b2"]
            with pytest.raises(shmlink.Empty):
                sub.try_recv()
            with pytest.raises(shmlink.Timeout):
                sub.recv(timeout=0.01)
        if backend == "shm":
            # (256 MiB on the fallback: its TooLarge is checked by the Rust conformance suite.)
            with pytest.raises(shmlink.TooLarge):
                pub.send(bytes(pub.max_message + 1))
        assert pub.published == 5
    for sub in subs:
        with pytest.raises(shmlink.Disconnected):
            sub.recv(timeout=5)
        sub.close()


def test_a_lossless_publisher_waits_for_its_slowest_subscriber(name):
    with shmlink.Publisher.create(name, capacity=4096) as pub, shmlink.Subscriber.connect(name) as sub:
        sent = 0
        with pytest.raises(shmlink.Full):
            while True:
                pub.try_send(b"x" * 100)
                sent += 1
        with pytest.raises(shmlink.Timeout):
            pub.send(b"x" * 100, timeout=0.02)
        behind = pub.subscribers()
        assert [s["slot"] for s in behind] == [sub.slot] and behind[0]["behind"] > 0
        assert len(sub.recv_batch(sent)) > 0
        pub.send(b"room again", timeout=5)


def test_an_overwrite_subscriber_is_told_what_it_missed(name):
    with shmlink.Publisher.create(name, capacity=4096, mode="overwrite") as pub:
        with shmlink.Subscriber.connect(name) as sub:
            for seq in range(1000):
                pub.try_send(seq.to_bytes(8, "little"))
            nxt, lags = 0, 0
            while True:
                try:
                    got = int.from_bytes(sub.try_recv(), "little")
                except shmlink.Lagged as e:
                    assert e.missed > 0 and e.channel == name
                    nxt += e.missed
                    lags += 1
                    continue
                except shmlink.Empty:
                    break
                assert got == nxt
                nxt += 1
            assert nxt == 1000 and lags == 1


def test_late_subscribers_get_the_history_they_ask_for(name):
    with shmlink.Publisher.create(name, history=4) as pub:
        for seq in range(10):
            pub.send_json(seq)
        with shmlink.Subscriber.connect(name, history=3) as sub:
            assert [sub.recv_json() for _ in range(3)] == [7, 8, 9]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dropped_subscriber_is_told(name, backend):
    with shmlink.Publisher.create(name, backend=backend) as pub, shmlink.Subscriber.connect(name) as sub:
        slot = sub.slot
        if backend == "ipc-channel":
            assert slot is None
            [slot] = [s["slot"] for s in pub.subscribers()]
        assert pub.drop_subscriber(slot)
        with pytest.raises(shmlink.Dropped):
            sub.recv(timeout=5)


def test_the_subscriber_limit(name):
    with shmlink.Publisher.create(name, max_subscribers=1):
        with shmlink.Subscriber.connect(name):
            with pytest.raises(shmlink.TooManySubscribers) as e:
                shmlink.Subscriber.connect(name)
            assert e.value.limit == 1
    with pytest.raises(shmlink.NotFound):
        shmlink.Subscriber.connect(name)
    with pytest.raises(shmlink.InvalidConfig):
        shmlink.Publisher.create(name, mode="sometimes")


SUBSCRIBER = """
import sys, shmlink
with shmlink.Subscriber.connect(sys.argv[1], timeout=30) as sub:
    print("ready", flush=True)
    got = []
    while True:
        try:
            got.append(sub.recv_json(timeout=30)["seq"])
        except shmlink.Disconnected:
            break
    assert got == list(range(int(sys.argv[2]))), got
    print("ok", len(got), flush=True)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_subscribers_in_other_processes_get_every_message(name, backend):
    count = 2000
    with shmlink.Publisher.create(name, capacity=4096, backend=backend) as pub:
        children = [python_child(SUBSCRIBER, name, str(count)) for _ in range(2)]
        for child in children:
            assert child.stdout.readline().strip() == "ready"
        for seq in range(count):
            pub.send_json({"seq": seq}, timeout=30)
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == f"ok {count}"


def test_a_rust_publisher_and_python_subscribers(name, rust_examples):
    publisher = subprocess.Popen(
        [rust_examples / "topic_publisher", name, "50", "2"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert publisher.stdout.readline().strip() == "ready"
        subs = [shmlink.Subscriber.connect(name, timeout=10) for _ in range(2)]
        for sub in subs:
            got = [sub.recv_json(timeout=30) for _ in range(50)]
            assert got == [{"seq": i, "from": "rust"} for i in range(50)]
        assert publisher.wait(timeout=30) == 0
        for sub in subs:
            with pytest.raises(shmlink.Disconnected):
                sub.recv(timeout=5)
            sub.close()
    finally:
        publisher.kill()
        publisher.wait()
