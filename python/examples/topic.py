"""Topics from Python: one publisher, any number of subscribers, in separate processes.

    python examples/topic.py pub ticks        # publishes a JSON tick ten times a second
    python examples/topic.py sub ticks        # in as many other terminals as you like

A Rust publisher works the same way (``cargo run -p shmlink-python --example topic_publisher --
ticks 10 1``), and so does a Rust subscriber of the same name.
"""

import sys
import time

import shmlink


def publish(name, count=None):
    with shmlink.Publisher.create(name, history=5) as publisher:
        seq = 0
        while count is None or seq < count:
            publisher.send_json({"seq": seq, "time": time.time()})
            if seq % 10 == 0:
                print(f"tick {seq}: {publisher.subscriber_count} subscribers", flush=True)
            seq += 1
            time.sleep(0.1)


def subscribe(name):
    # Asks for the last five ticks, and waits up to ten seconds for the publisher.
    with shmlink.Subscriber.connect(name, history=5, timeout=10) as subscriber:
        while True:
            try:
                tick = subscriber.recv_json()
            except shmlink.Disconnected:
                print(f"the publisher closed {name}")
                return
            print(f"tick {tick['seq']}", flush=True)


if __name__ == "__main__":
    role, name = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "ticks"
    if role == "pub":
        publish(name, int(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        subscribe(name)
