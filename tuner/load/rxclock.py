"""The kernel's receive stamps on Linux, and their clock mapped onto `perf_counter`.

A socket with `SO_TIMESTAMPNS` gets, with every `recvmsg`, the time the kernel received the last
packet of that read (software stamp, CLOCK_REALTIME). tuner.load.http1 reads with it; this module
holds what that needs: the option's number (Python's socket module has no name for it), whether
this platform has it, the CLOCK_REALTIME -> CLOCK_MONOTONIC offset, and a way to wait until the
kernel has switched stamping on.
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time

__all__ = ["ANC_SIZE", "KERNEL_STAMPS", "SO_TIMESTAMPNS", "KernelClock", "prime_stamps"]

# SO_TIMESTAMPNS (SCM_TIMESTAMPNS) is 35 where Linux uses the generic socket numbers (not alpha, mips,
# parisc, sparc: those are left to user-space stamps)
SO_TIMESTAMPNS = 35
_GENERIC_ARCH = {"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l", "armv8l", "riscv64", "ppc64le",
                 "ppc64", "s390x", "loongarch64"}
KERNEL_STAMPS = sys.platform.startswith("linux") and platform.machine().lower() in _GENERIC_ARCH
ANC_SIZE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0  # one struct timespec
_perf = time.perf_counter
_TS = struct.Struct("qq")  # struct timespec (64-bit time_t)


def stamp_ns(anc: list[tuple[int, int, bytes]]) -> int:
    """The kernel's receive stamp (CLOCK_REALTIME ns) in a `recvmsg`'s ancillary data; 0 when it has none."""
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TS.size:
            sec, ns = _TS.unpack_from(raw)
            if sec:
                return int(sec) * 1_000_000_000 + int(ns)
    return 0


class KernelClock:
    """CLOCK_REALTIME nanoseconds (kernel stamps) to perf_counter seconds: offset = realtime - monotonic,
    taken from the tightest of a few bracketing reads. Both clocks are slewed alike by NTP; only a
    step of the wall clock moves the offset, and `remeasure` shows it."""

    def __init__(self) -> None:
        self.offset_ns, self.width_ns = self._measure()
        self.first_ns = self.offset_ns

    @staticmethod
    def _measure() -> tuple[int, int]:
        best = (0, 1 << 62)
        rt, mono = time.CLOCK_REALTIME, time.perf_counter_ns
        for _ in range(25):
            a = time.clock_gettime_ns(rt)
            m = mono()
            b = time.clock_gettime_ns(rt)
            if b - a < best[1]:
                best = ((a + b) // 2 - m, b - a)
        return best

    def remeasure(self) -> float:
        """Measure again; the change since start, in seconds (what a wall-clock step did to the stamps)."""
        off, width = self._measure()
        self.width_ns = max(self.width_ns, width)
        drift = (off - self.first_ns) * 1e-9
        self.offset_ns = off
        return drift

    @property
    def uncertainty_s(self) -> float:
        return self.width_ns * 0.5e-9


def prime_stamps(timeout_s: float = 0.5) -> socket.socket | None:
    """Turn kernel receive stamps on and wait until they flow. Linux switches stamping on for the
    whole system in deferred work after the first socket asks, so the first packets after that can
    come unstamped; a UDP socket sending to itself shows when stamps arrive. Only a stamp taken on
    arrival counts: for a datagram that came unstamped, `recvmsg` fills in the time of the read itself
    (the kernel's "race between timestamp enabling and packet receiving"), which would end the wait
    while TCP reads still come without a stamp. A loopback datagram arrives within `sendto`, so its
    stamp is before a clock read between the two calls; a stamp filled in at the read is after it.
    Kept open (returned) while the client lives, it keeps them on. None when no stamp came in time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(timeout_s)
        end = _perf() + timeout_s
        while _perf() < end:
            sock.sendto(b"x", sock.getsockname())
            sent_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)
            _, anc, _, _ = sock.recvmsg(16, ANC_SIZE)
            stamp = stamp_ns(anc)
            if stamp and stamp <= sent_ns:  # stamped on arrival: stamping is on
                return sock
            time.sleep(0.002)
    except OSError:
        pass
    sock.close()
    return None
