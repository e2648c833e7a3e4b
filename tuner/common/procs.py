"""Process-tree lookups from /proc (Linux): which processes a server, a replica or a driver started."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Live descendants of `pid` (not `pid` itself), read from /proc parent links; children before their
    parents' siblings' children. Empty where /proc is missing."""
    parent_of: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent_of[int(entry)] = int(stat[stat.rfind(")") + 2:].split()[1])
    out, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == parent]
        out += kids
        frontier += kids
    return out
