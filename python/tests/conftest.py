"""Fixtures: unique channel names, a check that nothing is left in /dev/shm, the Rust examples."""

import itertools
import os
import pathlib
import subprocess
import sys

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
    subprocess.run(
        ["cargo", "build", "--quiet", "-p", "shmlink-python", "--examples"],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYO3_PYTHON": os.environ.get("PYO3_PYTHON", sys.executable)},
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
        child.communicate(timeout=10)
