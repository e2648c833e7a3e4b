"""argparse types for the command lines: a wrong number or path is refused by argparse itself (exit 2 with
the flag named), before anything is loaded, connected or started; float("nan") and 10**30 parse as numbers."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

LARGEST_COUNT = 2**31 - 1


def count(low: int = 1, high: int = LARGEST_COUNT) -> Callable[[str], int]:
    """A whole number in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value
    return parse


def number(low: float = 0.0, high: float = 1e12, *, low_open: bool = True, high_open: bool = False
           ) -> Callable[[str], float]:
    """A finite number in the interval (low, high] by default."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < low or (low_open and value == low) or value > high or (high_open and value == high):
            raise argparse.ArgumentTypeError(
                f"{value:g} is outside {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")
        return value
    return parse


SEED = count(0, 2**32 - 1)  # numpy and Optuna seeds are 32-bit unsigned
SECONDS = number(0.0, 7 * 86400.0)  # a positive duration up to a week


def path_arg(text: str) -> Path:
    """A path: never empty (that would be the current folder), never a NUL byte; `~` is the home folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a path")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("contains a NUL byte; give a plain path")
    return Path(text).expanduser()  # "~/runs" quoted past the shell means the home folder, not a folder "~"


def folder_arg(text: str) -> Path:
    """An output folder: a path, and not the file system's root (every run file would land in /)."""
    path = path_arg(text)
    if path.resolve() == Path(path.anchor or "/").resolve():
        raise argparse.ArgumentTypeError(f"{text} is the file system root; give a folder for this study")
    return path


def http_url(text: str) -> str:
    """An http(s) URL with a host, e.g. http://127.0.0.1:8000."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL with a host; write e.g. http://127.0.0.1:8000")
    return text.strip()
