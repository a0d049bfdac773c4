"""A Python client of a JSON service (examples/server.py, or the Rust json_server example).

    cargo run -p shmlink-python --example json_server -- calc    # a Rust server
    python examples/client.py calc 1000 [--stop]
"""

import sys

import shmlink


def main(name, count, stop):
    with shmlink.connect(name, timeout=10) as channel:
        for i in range(count):
            channel.send_json({"op": "add", "a": i, "b": 2 * i})
            reply = channel.recv_json(timeout=10)
            assert reply["sum"] == 3 * i, reply
        if stop:
            channel.send_json({"op": "stop"})
            channel.recv_json(timeout=10)
    print(f"ok {count}", reply.get("from") if count else "")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "calc", int(args[1]) if len(args) > 1 else 100, "--stop" in sys.argv)
