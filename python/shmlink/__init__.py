"""shmlink: low-latency messaging between processes on one Linux host.

A channel is a pair of lock-free single-producer/single-consumer rings of byte frames in a
*named* shared-memory mapping. One process creates it by name, one other connects to it by
name; both can send and receive. The Rust crate ``shmlink`` speaks the same protocol, so a
Python process and a Rust process can be the two ends of one channel.

>>> import shmlink
>>> with shmlink.Channel.create("demo") as server, shmlink.Channel.connect("demo") as client:
...     client.send(b"ping")
...     server.recv()
b'ping'

Every wait (``recv``, ``send`` on a full ring, ``accept``, ``Selector.wait``, ``connect`` with a
timeout) releases the GIL, and waits in slices of ``SLICE_SECONDS`` (0.05 s) so that Ctrl-C
interrupts it. ``timeout=`` is in seconds; ``None`` waits as long as it takes. A batch receive
stops taking messages one slice after its first (or at a ring's worth, or its deadline), so a
peer that never lets the ring run dry cannot keep it going.

JSON goes through ``orjson`` when it is installed (``pip install shmlink[fast-json]``), else
the standard ``json`` module; ``JSON_CODEC`` says which. Either way, a message that is not JSON
(or an object that cannot be encoded) raises ``JsonError``, a ``ShmlinkError``.

Topics: ``Publisher.create(name)`` publishes each message once to every ``Subscriber.connect(name)``
(``mode="lossless"``: the publisher waits for the slowest live subscriber; ``"overwrite"``: it
never waits, and a lapped subscriber gets ``Lagged`` with ``missed``). A Rust publisher or
subscriber of the same name is the same topic.

Plain values (``ctypes`` structures) travel as their bytes: ``send_value(tick)`` on one end,
``recv_value(Tick)`` on the other, which raises ``WrongSize`` for a message of another length.
A Rust peer reads the same message with ``recv_value::<Tick>()`` of a ``#[repr(C)]`` struct of
the same layout.
"""

from __future__ import annotations

from . import _shmlink
from ._shmlink import (
    MAX_NAME_LEN,
    SLICE_SECONDS,
    AlreadyConnected,
    AlreadyExists,
    Channel,
    Closed,
    Corrupt,
    Disconnected,
    Empty,
    Endpoint,
    Full,
    Incompatible,
    InvalidConfig,
    InvalidName,
    IoError,
    JsonError,
    WrongSize,
    Listener,
    NotAChannel,
    NotFound,
    NotPrivate,
    NotReady,
    PeerGone,
    Selector,
    ShmlinkError,
    Timeout,
    TooLarge,
    TooManyClients,
    TooManySubscribers,
    Lagged,
    Dropped,
    Publisher,
    Subscriber,
)

try:
    import orjson as _orjson

    JSON_CODEC = "orjson"
    _shmlink._set_codec(_orjson.dumps, _orjson.loads)
except ImportError:  # pragma: no cover - depends on the environment
    import functools as _functools
    import json as _json

    JSON_CODEC = "json"
    _shmlink._set_codec(
        _functools.partial(_json.dumps, separators=(",", ":"), ensure_ascii=False), _json.loads
    )


def connect(name: str, wait: str = "block", timeout: float | None = None) -> Channel:
    """Connects to the channel or listener named ``name`` (``Channel.connect``)."""
    return Channel.connect(name, wait=wait, timeout=timeout)


__all__ = [
    "AlreadyConnected",
    "AlreadyExists",
    "Channel",
    "Closed",
    "Corrupt",
    "Disconnected",
    "Empty",
    "Endpoint",
    "Full",
    "Incompatible",
    "InvalidConfig",
    "InvalidName",
    "IoError",
    "JSON_CODEC",
    "JsonError",
    "WrongSize",
    "Listener",
    "MAX_NAME_LEN",
    "NotAChannel",
    "NotFound",
    "NotPrivate",
    "NotReady",
    "PeerGone",
    "SLICE_SECONDS",
    "Selector",
    "ShmlinkError",
    "Timeout",
    "TooLarge",
    "TooManyClients",
    "TooManySubscribers",
    "Lagged",
    "Dropped",
    "Publisher",
    "Subscriber",
    "connect",
]
