"""A Python JSON service that Rust clients (or Python ones) use.

    python examples/server.py calc
    cargo run -p shmlink-python --example json_client -- calc 1000    # a Rust client
    python examples/client.py calc                                    # a Python client

Binds a listener; each client gets its own channel, served by its own thread (waits release
the GIL). Requests: {"op": "add", "a": 1, "b": 2} -> {"sum": 3}; {"op": "echo", ...} -> the
request; {"op": "stop"} -> {"stopped": true}, and the server exits. Prints "ready" once bound.
"""

import sys
import threading

import shmlink


def answer(request):
    op = request.get("op")
    if op == "add":
        return {"sum": request.get("a", 0) + request.get("b", 0), "from": "python"}
    if op == "echo":
        return request
    if op == "stop":
        return {"stopped": True}
    return {"error": "unknown op"}


def serve(channel, stop):
    with channel:
        while True:
            try:
                request = channel.recv_json()
            except (shmlink.Disconnected, shmlink.PeerGone):
                return
            channel.send_json(answer(request))
            if request.get("op") == "stop":
                stop.set()
                return


def main(name):
    stop = threading.Event()
    with shmlink.Listener.bind(name) as listener:
        print("ready", flush=True)
        workers = []
        while not stop.is_set():
            try:
                channel = listener.accept(timeout=0.2)
            except shmlink.Timeout:
                continue
            worker = threading.Thread(target=serve, args=(channel, stop), daemon=True)
            worker.start()
            workers.append(worker)
        for worker in workers:
            worker.join(timeout=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "calc")
