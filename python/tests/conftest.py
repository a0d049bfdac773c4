"""Fixtures: unique channel names, a check that nothing is left in /dev/shm, the Rust examples,
child processes that are always reaped, and threads whose failures fail the test."""

import itertools
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_seq = itertools.count()


def shm_entries(prefix):
    return sorted(e for e in os.listdir("/dev/shm") if e.startswith("shmlink-" + prefix))


@pytest.fixture
def name(request):
    """A channel name no other test uses; after the test, nothing under it is left in /dev/shm."""
    prefix = f"pytest-{os.getpid()}-{next(_seq)}"
    yield prefix
    left = shm_entries(prefix)
    assert not left, f"left in /dev/shm: {left}"


@pytest.fixture(scope="session")
def rust_examples():
    """The directory holding the Rust examples json_server and json_client (built here unless
    SHMLINK_RUST_EXAMPLES names it)."""
    given = os.environ.get("SHMLINK_RUST_EXAMPLES")
    if given:
        return pathlib.Path(given)
    # A build from nothing on a loaded machine takes minutes; the per-test timeout does not
    # count fixtures, so this one has its own.
    subprocess.run(
        ["cargo", "build", "--quiet", "-p", "shmlink-python", "--examples"],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYO3_PYTHON": os.environ.get("PYO3_PYTHON", sys.executable)},
        timeout=1800,
    )
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "examples"


def python_child(code, *args, **kwargs):
    """Starts `python -c code args...` with pipes for stdin, stdout and stderr."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.fixture
def spawn():
    """Starts child processes and reaps every one of them after the test (killing any still
    running)."""
    children = []

    def start(code, *args, **kwargs):
        child = python_child(code, *args, **kwargs)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        reap(child)


def read_line(proc, timeout=10):
    """The next line `proc` prints (stripped), or a failure of the test if none comes within
    `timeout` seconds (then `proc` is killed, which ends the read)."""
    got = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        proc.kill()
        reader.join(10)
        pytest.fail(f"no line from pid {proc.pid} within {timeout} s")
    return got[0].strip()


def reap(proc, timeout=10):
    """Waits for `proc` to end (killing it after `timeout` seconds; 0: at once if it still
    runs) and returns its output."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate(timeout=10)


class Threads:
    """Threads of one test: `start(f, *args)` runs `f` in a thread; `join(timeout)` waits for
    all of them, fails the test if one is still running after `timeout` seconds, and raises
    the first exception a thread raised."""

    def __init__(self):
        self._threads = []
        self._errors = []

    def start(self, f, *args):
        def run():
            try:
                f(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the test's thread
                self._errors.append(e)

        t = threading.Thread(target=run, daemon=True)
        self._threads.append(t)
        t.start()
        return t

    def join(self, timeout=10):
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        errors, self._errors = self._errors, []
        if errors:
            raise errors[0]
        if stuck:
            pytest.fail(f"threads still running after {timeout} s: {stuck}")


@pytest.fixture
def threads():
    """A `Threads` whose threads are joined (and their failures raised) after the test, if the
    test did not join them itself."""
    ts = Threads()
    yield ts
    ts.join(30)
