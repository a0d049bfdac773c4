"""``python -m shmlink [--dry-run] [NAME...]``: the channels on this machine.

Lists the shmlink channels (state, size, creator and connector) and removes those whose
creator is gone, like the ``shmlink-clean`` tool of the Rust crate. A live channel is never
touched; entries named like channels that are not ones are listed as skipped. With
``--dry-run`` nothing is removed; with names, only those channels are considered.
"""

from __future__ import annotations

import sys
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dry_run = False
    names: list[str] = []
    for arg in args:
        if arg in ("--dry-run", "-n"):
            dry_run = True
        elif arg in ("-h", "--help"):
            print("usage: python -m shmlink [--dry-run] [NAME...]")
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
