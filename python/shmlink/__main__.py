"""``python -m shmlink list|stat|clean``: what shmlink has on this machine, as the ``shmlink``
command of the Rust crate shows it (the same tables and the same JSON documents).

* ``list [--json | --format prometheus]``: every channel, listener and topic, on shared memory
  and on the ipc-channel fallback.
* ``stat NAME [--json | --format prometheus]``: every counter of a shared-memory channel, topic
  or listener.
* ``clean [--dry-run]``: removes the shared-memory mappings whose creator is gone.

The older form ``python -m shmlink [--dry-run] [NAME...]`` lists the channels (state, size,
creator and connector) and removes those whose creator is gone; with names, only those.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from . import NotAChannel, NotFound, ShmlinkError, _shmlink


def _endpoint(e: dict[str, Any]) -> str:
    if e["pid"] == 0:
        return str(e["state"])
    alive = "alive" if e["alive"] else "dead"
    return f"{e['state']} pid {e['pid']} ({alive})"


def _row(seg: dict[str, Any]) -> str:
    state = "stale" if seg["stale"] else ("live" if seg["ready"] else "initialising")
    return (
        f"{seg['name']:<32} {state:<13} {seg['size']:>10}  "
        f"creator: {_endpoint(seg['creator']):<28} connector: {_endpoint(seg['connector'])}"
    )


_OUTCOME = {
    "removed": "  -> removed",
    "vanished": "  -> already gone",
    "alive": "  -> kept (owner came back)",
    "not-a-channel": "  -> kept (replaced by something else)",
}


def _pid(e: dict[str, Any]) -> str:
    if e["pid"] == 0:
        return "-"
    return f"{e['pid']}{'' if e['alive'] else ' (dead)'}"


def _document() -> dict[str, Any]:
    """The document of ``list --json``, as the Rust command makes it."""
    segs, skipped = _shmlink.scan()
    # Each listener's connections right after it, in name order; its clients its peers.
    ordered = []
    clients = {}
    for seg in segs:
        if seg["listener"] is None:
            conns = [c for c in segs if c["listener"] == seg["name"]]
            clients[seg["name"]] = [c["creator"] for c in conns]
            ordered += [seg, *conns]
    entries = []
    for seg in ordered:
        if seg["kind"] == "topic":
            peers = seg["subscribers"]
        elif seg["kind"] == "listener":
            peers = clients[seg["name"]]
        elif seg["connector"]["pid"] != 0:
            peers = [seg["connector"]]
        else:
            peers = []
        state = "stale" if seg["stale"] else ("live" if seg["ready"] else "initialising")
        entry = {"name": seg["name"], "kind": seg["kind"], "backend": "shm", "state": state, "size": seg["size"]}
        if seg["age_s"] is not None:
            entry["age_s"] = seg["age_s"]
        rings = []
        if seg["ready"] and not seg["stale"]:
            try:
                rings = json.loads(_shmlink.stats_json(seg["name"]))["rings"]
            except ShmlinkError:
                pass  # gone, or not ours, by now: no counters to show
        if rings:
            entry["capacity"] = rings[0]["capacity"]
            entry["fill"] = max(r["fill"] for r in rings)
        entry["creator"] = seg["creator"]
        entry["peers"] = peers
        if seg["listener"] is not None:
            entry["listener"] = seg["listener"]
        entries.append(entry)
    for f in _shmlink.list_fallback():
        entries.append(
            {
                "name": f["name"],
                "kind": f["kind"],
                "backend": "ipc-channel",
                "state": "live" if f["alive"] else "stale",
                "creator": {"state": "present", "pid": f["pid"], "alive": f["alive"]},
                "peers": [],
            }
        )
    return {"entries": entries, "skipped": [{"name": n, "reason": r} for n, r in skipped]}


def _list(fmt: str) -> int:
    doc = _document()
    if fmt == "prometheus":
        names = [e["name"] for e in doc["entries"] if e["backend"] == "shm" and e["state"] == "live"]
        live = []
        for name in names:
            try:
                _shmlink.stats_json(name)
                live.append(name)
            except ShmlinkError:
                pass  # gone, or not ready, by now: no counters to show
        print(_shmlink.prometheus(live), end="")
        return 0
    if fmt == "json":
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{'NAME':<32} {'KIND':<8} {'BACKEND':<11} {'STATE':<12} {'BYTES':>10} {'AGE':>8} "
        f"{'CAPACITY':>10} {'FILL':>6}  {'CREATOR':<14} PEERS"
    )
    for e in doc["entries"]:
        peers = ", ".join(_pid(p) for p in e["peers"]) or "-"
        size = str(e["size"]) if "size" in e else "-"
        age = f"{e['age_s']}s" if "age_s" in e else "-"
        capacity = str(e["capacity"]) if "capacity" in e else "-"
        fill = f"{100.0 * e['fill'] / max(e['capacity'], 1):.1f}%" if "capacity" in e else "-"
        name = f"  {e['name']}" if "listener" in e else e["name"]
        print(
            f"{name:<32} {e['kind']:<8} {e['backend']:<11} {e['state']:<12} {size:>10} {age:>8} "
            f"{capacity:>10} {fill:>6}  {_pid(e['creator']):<14} {peers}"
        )
    for s in doc["skipped"]:
        print(f"{s['name']:<32} skipped: {s['reason']}")
    return 0


def _ago(c: dict[str, Any]) -> str:
    if c["last_ns"] == 0:
        return "never"
    ago = time.time() - c["last_ns"] / 1e9
    return f"{ago:.1f}s ago" if ago >= 0 else "never"


def _table(s: dict[str, Any]) -> str:
    """The table of ``stat NAME`` (without rates), as the Rust command prints it."""
    out = [f"{s['name']} ({s['kind']})"]

    def side(who: str, c: dict[str, Any]) -> None:
        out.append(
            f"  {who:<10} messages {c['messages']:>12} ({'-':>10})  bytes {c['bytes']:>14} "
            f"({'-':>12})  fragments {c['fragments']:>8}  full {c['full']:>8} ({'-':>7})  "
            f"sleeps {c['sleeps']:>8} ({'-':>7})  wakes {c['wakes']:>8}  missed {c['missed']:>6}  "
            f"last {_ago(c)}"
        )

    for r in s["rings"]:
        pct = 100.0 * r["fill"] / max(r["capacity"], 1)
        out.append(
            f" {r['direction']}: capacity {r['capacity']} fill {r['fill']} ({pct:.1f}%) "
            f"high water {r['sender']['high_water']}"
        )
        side("sender", r["sender"])
        if s["kind"] != "topic":
            side("receiver", r["receiver"])
    for sub in s["subscribers"]:
        dead = "" if sub["alive"] else ", dead"
        out.append(f" subscriber slot {sub['slot']} ({sub['state']}, pid {sub['pid']}{dead}): lag {sub['lag']} bytes")
        side("reader", sub["counts"])
    for c in s["clients"]:
        out.append(f" client {c} (shmlink stat {c})")
    return "\n".join(out)


def _stat(name: str, fmt: str) -> int:
    if fmt == "prometheus":
        print(_shmlink.prometheus([name]), end="")
        return 0
    s = json.loads(_shmlink.stats_json(name))
    print(json.dumps(s, indent=2) if fmt == "json" else _table(s))
    return 0


def _clean(dry_run: bool) -> int:
    segs, _ = _shmlink.scan()
    for seg in segs:
        if not seg["stale"]:
            continue
        if dry_run:
            print(f"would remove {seg['name']} ({seg['kind']} {seg['size']})")
        elif _shmlink.reclaim(seg["name"]) == "removed":
            print(f"removed {seg['name']}")
    return 0


def _commands(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m shmlink", description="What shmlink has on this machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    formats = ["text", "json", "prometheus"]
    p = sub.add_parser("list", help="every channel, listener and topic on this machine, on either backend")
    p.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    p.add_argument("--format", choices=formats, default="text")
    p = sub.add_parser("stat", help="every counter of a shared-memory channel, topic or listener")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    p.add_argument("--format", choices=formats, default="text")
    p = sub.add_parser("clean", help="removes the shared-memory mappings whose creator is gone")
    p.add_argument("--dry-run", "-n", action="store_true", help="say what would be removed; remove nothing")
    a = parser.parse_args(args)
    try:
        if a.command == "list":
            return _list("json" if a.json else a.format)
        if a.command == "stat":
            return _stat(a.name, "json" if a.json else a.format)
        return _clean(a.dry_run)
    except ShmlinkError as e:
        print(f"python -m shmlink: {e}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("list", "stat", "clean"):
        return _commands(args)
    dry_run = False
    names: list[str] = []
    for arg in args:
        if arg in ("--dry-run", "-n"):
            dry_run = True
        elif arg in ("-h", "--help"):
            print("usage: python -m shmlink list|stat|clean ...  (or: python -m shmlink [--dry-run] [NAME...])")
            return 0
        else:
            names.append(arg)
    try:
        if names:
            segs, skipped = [], []
            for name in names:
                try:
                    segs.append(_shmlink.inspect(name))
                except NotFound:
                    print(f"python -m shmlink: no segment {name!r}", file=sys.stderr)
                except NotAChannel as e:
                    skipped.append((name, str(e)))
                except ShmlinkError as e:
                    skipped.append((name, str(e)))
        else:
            segs, skipped = _shmlink.scan()
    except ShmlinkError as e:
        print(f"python -m shmlink: {e}", file=sys.stderr)
        return 1
    print(f"{'NAME':<32} {'STATE':<13} {'BYTES':>10}  owner")
    removed = 0
    for seg in segs:
        line = _row(seg)
        if seg["stale"] and not dry_run:
            try:
                outcome = _shmlink.reclaim(seg["name"])
                removed += outcome == "removed"
                line += _OUTCOME.get(outcome, f"  -> {outcome}")
            except ShmlinkError as e:
                line += f"  -> kept ({e})"
        print(line)
    for name, reason in skipped:
        print(f"{name:<32} skipped: {reason}")
    stale = sum(1 for s in segs if s["stale"])
    if dry_run:
        print(f"{len(segs)} segments, {stale} stale, {len(skipped)} skipped (dry run: nothing removed)")
    else:
        print(f"{len(segs)} segments, {stale} stale, {removed} removed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
