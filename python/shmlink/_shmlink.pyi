"""Types of the extension module; the package ``shmlink`` re-exports them."""

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from typing_extensions import Buffer

_V = TypeVar("_V")

_Wait = Literal["block", "spin", "yield"]

SLICE_SECONDS: float
"""The longest a wait runs without looking for a pending signal (Ctrl-C): 0.05 s."""
MAX_NAME_LEN: int
"""The longest name of a channel or listener, in bytes."""

class ShmlinkError(Exception):
    """Base class of every shmlink error."""

class Timeout(ShmlinkError):
    """A wait ran past its deadline (``timeout=``)."""

class Full(ShmlinkError):
    """No room in the channel now (``try_send``)."""

class Empty(ShmlinkError):
    """Nothing waiting now (``try_recv``, ``try_accept``)."""

class Disconnected(ShmlinkError):
    """The peer closed its end (everything it sent has been received)."""
    channel: str

class PeerGone(ShmlinkError):
    """The peer's process exited or was killed without closing its end."""
    channel: str
    pid: int

class TooLarge(ShmlinkError):
    """The message is longer than the receiver, this side or the buffer accepts."""
    len: int
    max: int

class WrongSize(ShmlinkError):
    """A message that is not exactly one value of the type ``recv_value`` asked for (the
    message is consumed; the channel keeps working)."""
    channel: str
    len: int
    expected: int

class Corrupt(ShmlinkError):
    """The shared memory holds a value this side will not interpret."""

class NotFound(ShmlinkError):
    """Nothing exists under that name (yet)."""

class NotReady(ShmlinkError):
    """The channel exists but its creator has not finished making it."""

class AlreadyExists(ShmlinkError):
    """A channel or listener of that name exists and its creator is alive."""

class AlreadyConnected(ShmlinkError):
    """The channel already has (or had) its connecting end: a channel serves one connection."""

class InvalidName(ShmlinkError):
    """1 to MAX_NAME_LEN ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-'."""

class InvalidConfig(ShmlinkError):
    """A configuration value (such as the capacity) is out of range."""

class NotPrivate(ShmlinkError):
    """The object under the name belongs to another user or is open to other users."""

class NotAChannel(ShmlinkError):
    """The entry under the name is not a shmlink channel."""

class Incompatible(ShmlinkError):
    """The channel was made by an incompatible build (magic, version, layout or size)."""

class TooManyClients(ShmlinkError):
    """The listener already serves as many clients as it accepts."""

class TooManySubscribers(ShmlinkError):
    """The topic has as many subscribers as its publisher admits."""
    limit: int

class Lagged(ShmlinkError):
    """A subscriber of an overwrite topic fell a ring behind; the next receive gives the oldest
    message still there."""
    missed: int
    """How many messages it will never see."""

class Dropped(ShmlinkError):
    """The topic's publisher dropped this subscriber; subscribe again to go on."""

class Closed(ShmlinkError):
    """The channel or listener was closed on this side."""

class IoError(ShmlinkError):
    """An operating-system call failed."""
    errno: int

class JsonError(ShmlinkError, ValueError):
    """A received message that is not JSON (``recv_json``), or an object the JSON codec cannot
    encode (``send_json``). The message is the codec's, and its exception is ``__cause__``."""
    data: bytes | None
    """The message that did not decode (``None`` when encoding failed)."""

class Channel:
    """One end of a duplex shared-memory channel: both ends send and receive.

    Every wait releases the GIL; ``timeout`` is in seconds, ``None`` waits as long as it takes.
    One thread at a time uses a channel (a second one waits for the first's call to end, or
    for the current 0.05 s slice of its wait).
    """

    @staticmethod
    def create(name: str, capacity: int = 1048576, wait: _Wait = "block") -> Channel:
        """Makes the channel ``name`` (``capacity`` bytes per direction, a power of two)."""
    @staticmethod
    def connect(name: str, wait: _Wait = "block", timeout: float | None = None) -> Channel:
        """Connects to the channel or listener ``name``, waiting up to ``timeout`` seconds for
        it to appear (``None``: try once)."""
    def send(self, data: Buffer, timeout: float | None = None) -> None:
        """Sends ``data``, waiting for room (``Timeout`` after ``timeout`` seconds)."""
    def try_send(self, data: Buffer) -> None:
        """Sends ``data`` now, or raises ``Full``."""
    def send_json(self, obj: Any, timeout: float | None = None) -> None:
        """Sends ``obj`` encoded as JSON (``JsonError`` if the codec cannot encode it)."""
    def try_send_json(self, obj: Any) -> None:
        """Sends ``obj`` encoded as JSON now, or raises ``Full``."""
    def recv(self, timeout: float | None = None) -> bytes:
        """Receives the next message (``Timeout`` after ``timeout`` seconds)."""
    def try_recv(self) -> bytes:
        """Receives the message waiting now, or raises ``Empty``."""
    def recv_into(self, buffer: Buffer, timeout: float | None = None) -> int:
        """Receives the next message into the writable, C-contiguous ``buffer`` (its bytes,
        whatever its item type: a numpy array of any dtype too); returns its length in bytes.
        A longer message raises ``TooLarge`` and is dropped; a read-only buffer raises
        ``TypeError``, one that is not contiguous ``ValueError``."""
    def try_recv_into(self, buffer: Buffer) -> int:
        """``recv_into`` of the message waiting now, or raises ``Empty``."""
    def send_batch(self, batch: Iterable[Buffer], timeout: float | None = None) -> int:
        """Sends the messages of ``batch`` in order, as many at a time as fit, published
        together; returns how many went (fewer only when one could not go after others had:
        the next call, starting with it, raises its error)."""
    def try_send_batch(self, batch: Iterable[Buffer]) -> int:
        """``send_batch`` of the messages that go now; ``Full`` when not even the first does."""
    def recv_batch(self, max: int, timeout: float | None = None) -> list[bytes]:
        """Receives the next message (``Timeout`` after ``timeout`` seconds) and those waiting
        behind it, up to ``max`` in all, but no more than a ring's worth, and for no longer
        than ``SLICE_SECONDS`` after the first or past the deadline: a peer that never lets
        the ring run dry does not keep the call going."""
    def try_recv_batch(self, max: int) -> list[bytes]:
        """``recv_batch`` of the messages waiting now (with the same bounds), or raises
        ``Empty``."""
    def recv_json(self, timeout: float | None = None) -> Any:
        """Receives the next message and decodes it as JSON (``JsonError`` if it is not)."""
    def try_recv_json(self) -> Any:
        """Receives the message waiting now and decodes it as JSON, or raises ``Empty``."""
    def send_value(self, value: Buffer, timeout: float | None = None) -> None:
        """Sends a plain value (a ``ctypes.Structure`` instance, a numpy record...): its bytes as
        they are in memory, as one message."""
    def try_send_value(self, value: Buffer) -> None:
        """``send_value`` now, or raises ``Full``."""
    def recv_value(self, cls: Callable[[], _V], timeout: float | None = None) -> _V:
        """Receives the next message into a new ``cls()`` (a ctypes type); a message that is not
        exactly its size raises ``WrongSize``."""
    def try_recv_value(self, cls: Callable[[], _V]) -> _V:
        """``recv_value`` of the message waiting now, or raises ``Empty``."""
    def close(self) -> None:
        """Closes this end; closing twice does nothing."""
    @property
    def closed(self) -> bool: ...
    @property
    def name(self) -> str: ...
    @property
    def max_frame(self) -> int:
        """The largest message that travels as one frame (longer ones are fragmented)."""
    @property
    def max_message(self) -> int:
        """The largest message this end accepts (published to the peer)."""
    @max_message.setter
    def max_message(self, value: int) -> None: ...
    @property
    def capacity(self) -> int | None:
        """Bytes in each direction's ring (``None`` on the ipc-channel backend)."""
    @property
    def peer_pid(self) -> int | None: ...
    def is_peer_connected(self) -> bool: ...
    @property
    def backend(self) -> Literal["shm", "ipc-channel"]: ...
    def stats(self) -> dict[str, Any]:
        """The channel's counters, as ``shmlink stat NAME --json`` prints them (``NotAChannel``
        on the ipc-channel backend)."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

class Publisher:
    """The publishing end of a topic: each message is written once and every subscriber reads
    it. ``"lossless"`` topics make ``send`` wait for the slowest live subscriber;
    ``"overwrite"`` ones never wait (a lapped subscriber gets ``Lagged``)."""

    @staticmethod
    def create(
        name: str,
        capacity: int = 1048576,
        wait: _Wait = "block",
        mode: Literal["lossless", "overwrite"] = "lossless",
        history: int = 0,
        max_subscribers: int = 64,
        backend: Literal["shm", "ipc-channel"] | None = None,
    ) -> Publisher:
        """Makes the topic ``name`` (a ring of ``capacity`` bytes, a power of two), keeping
        ``history`` messages for subscribers that join late; on shared memory where a mapping
        can be made, else on ipc-channel (``backend`` forces one)."""
    def send(self, data: Buffer, timeout: float | None = None) -> None:
        """Publishes ``data``, waiting for room (``Timeout`` after ``timeout`` seconds)."""
    def try_send(self, data: Buffer) -> None:
        """Publishes ``data`` now, or raises ``Full``."""
    def send_json(self, obj: Any, timeout: float | None = None) -> None:
        """Publishes ``obj`` encoded as JSON."""
    def try_send_json(self, obj: Any) -> None:
        """Publishes ``obj`` encoded as JSON now, or raises ``Full``."""
    def send_value(self, value: Buffer, timeout: float | None = None) -> None:
        """Publishes a plain value (its bytes) as one message."""
    def try_send_value(self, value: Buffer) -> None:
        """``send_value`` now, or raises ``Full``."""
    def send_batch(self, batch: Iterable[Buffer], timeout: float | None = None) -> int:
        """Publishes the messages of ``batch`` in order; how many went."""
    def try_send_batch(self, batch: Iterable[Buffer]) -> int:
        """``send_batch`` of the messages that go now; ``Full`` when not even the first does."""
    def subscribers(self) -> list[dict[str, Any]]:
        """The subscribers in the table: ``slot``, ``state``, ``pid``, ``alive``, ``behind``."""
    @property
    def subscriber_count(self) -> int: ...
    @property
    def published(self) -> int: ...
    def drop_subscriber(self, slot: int) -> bool:
        """Drops the subscriber in ``slot`` (its next receive raises ``Dropped``)."""
    @property
    def max_message(self) -> int:
        """The largest message (a topic does not fragment)."""
    @property
    def mode(self) -> Literal["lossless", "overwrite"]: ...
    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> Literal["shm", "ipc-channel"]: ...
    def close(self) -> None:
        """Closes the topic; subscribers read what is left, then get ``Disconnected``."""
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

class Subscriber:
    """A subscriber of a topic: every message published after it joined, in order."""

    @staticmethod
    def connect(
        name: str, wait: _Wait = "block", history: int = 0, timeout: float | None = None
    ) -> Subscriber:
        """Joins the topic ``name``, asking for up to ``history`` earlier messages, waiting up
        to ``timeout`` seconds for it to appear (``None``: try once)."""
    def recv(self, timeout: float | None = None) -> bytes:
        """Receives the next message (``Timeout`` after ``timeout`` seconds)."""
    def try_recv(self) -> bytes:
        """Receives the message waiting now, or raises ``Empty``."""
    def recv_into(self, buffer: Buffer, timeout: float | None = None) -> int:
        """Receives the next message into ``buffer``; its length."""
    def try_recv_into(self, buffer: Buffer) -> int:
        """``recv_into`` of the message waiting now, or raises ``Empty``."""
    def recv_json(self, timeout: float | None = None) -> Any:
        """Receives the next message and decodes it as JSON."""
    def try_recv_json(self) -> Any:
        """Receives the message waiting now and decodes it as JSON, or raises ``Empty``."""
    def recv_value(self, cls: Callable[[], _V], timeout: float | None = None) -> _V:
        """Receives the next message into a new ``cls()``."""
    def try_recv_value(self, cls: Callable[[], _V]) -> _V:
        """``recv_value`` of the message waiting now, or raises ``Empty``."""
    def recv_batch(self, max: int, timeout: float | None = None) -> list[bytes]:
        """Receives the next message and those waiting behind it, up to ``max``."""
    def try_recv_batch(self, max: int) -> list[bytes]:
        """``recv_batch`` of the messages waiting now, or raises ``Empty``."""
    @property
    def slot(self) -> int | None: ...
    @property
    def peer_pid(self) -> int | None: ...
    def is_peer_connected(self) -> bool: ...
    @property
    def max_message(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> Literal["shm", "ipc-channel"]: ...
    def close(self) -> None:
        """Leaves the topic."""
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

class Endpoint(Channel):
    """A channel on shared memory where a mapping can be made, else on ipc-channel."""

    @staticmethod
    def create(  # type: ignore[override]
        name: str,
        capacity: int = 1048576,
        wait: _Wait = "block",
        backend: Literal["shm", "ipc-channel"] | None = None,
    ) -> Endpoint: ...
    @staticmethod
    def connect(name: str, wait: _Wait = "block", timeout: float | None = None) -> Endpoint: ...

class Listener:
    """A name clients connect to with ``Channel.connect``; ``accept`` gives each its own channel."""

    @staticmethod
    def bind(
        name: str, capacity: int = 1048576, wait: _Wait = "block", max_clients: int | None = None
    ) -> Listener: ...
    def accept(self, timeout: float | None = None) -> Channel:
        """Accepts the next client (``Timeout`` after ``timeout`` seconds)."""
    def try_accept(self) -> Channel:
        """Accepts a client waiting now, or raises ``Empty``."""
    @property
    def name(self) -> str: ...
    @property
    def max_clients(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Stops accepting and removes the name; accepted channels stay open."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

class Selector:
    """Waits on many shared-memory channels at once."""

    def __init__(self) -> None: ...
    def wait(self, channels: list[Channel], timeout: float | None = None) -> list[int]:
        """Indices of the channels with a message (or whose peer closed or died), once there
        is one; empty after ``timeout`` seconds."""
    def poll(self, channels: list[Channel]) -> list[int]:
        """Indices of the ready channels now, without waiting."""

def scan() -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The channels on this machine (dicts) and the entries skipped, as (name, reason)."""

def inspect(name: str) -> dict[str, Any]:
    """The channel ``name``, as a dict like ``scan``'s."""

def reclaim(name: str) -> Literal["removed", "vanished", "alive", "not-a-channel"]:
    """Removes the channel ``name`` if its creator is gone."""

def list_fallback() -> list[dict[str, Any]]:
    """The channels, listeners and topics of the ipc-channel fallback (``name``, ``kind``,
    ``pid``, ``alive``)."""

def stats_json(name: str) -> str:
    """The counters of ``name`` as the JSON document of ``shmlink stat --json``."""

def prometheus(names: list[str]) -> str:
    """The counters of ``names`` in the Prometheus text format."""

def _set_codec(dumps: Callable[[Any], bytes | str], loads: Callable[[bytes], Any]) -> None: ...
