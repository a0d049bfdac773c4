"""Python and C++ on the same names: a C++ program (shmlink-c/tests/cpp/test.cpp, built by CI
and named by SHMLINK_CPP_PEER) echoes a Python channel's messages and publishes to a Python
subscriber. Without SHMLINK_CPP_PEER the tests are skipped, and say so; CI sets it, and
SHMLINK_CPP_REQUIRED=1, which makes its absence a failure."""

import os
import subprocess

import pytest
import shmlink

PEER = os.environ.get("SHMLINK_CPP_PEER")
# Where the peer is meant to be there (CI), its absence fails the tests instead of skipping them.
REQUIRED = os.environ.get("SHMLINK_CPP_REQUIRED") == "1"
needs_peer = pytest.mark.skipif(
    not PEER and not REQUIRED, reason="SHMLINK_CPP_PEER (the built C++ test program) is not set"
)


@needs_peer
def test_a_cpp_process_echoes_a_python_channel(name):
    assert PEER, "SHMLINK_CPP_PEER is not set where SHMLINK_CPP_REQUIRED=1"
    with shmlink.Channel.create(name) as ch:
        peer = subprocess.Popen([PEER, "echo", name])
        try:
            for i in range(200):
                msg = bytes([i % 256]) * (i * 331 % 50000)
                ch.send(msg)
                assert ch.recv(timeout=10) == msg
        finally:
            ch.close()
            assert peer.wait(timeout=10) == 0


@needs_peer
def test_a_python_subscriber_gets_every_message_a_cpp_publisher_sends(name):
    assert PEER, "SHMLINK_CPP_PEER is not set where SHMLINK_CPP_REQUIRED=1"
    peer = subprocess.Popen([PEER, "publish", name, "500"])
    try:
        sub = shmlink.Subscriber.connect(name, timeout=10)
        for i in range(500):
            assert sub.recv(timeout=10) == f"message {i}".encode()
        with pytest.raises(shmlink.Disconnected):
            sub.recv(timeout=10)
        sub.close()
    finally:
        assert peer.wait(timeout=10) == 0
