"""Check tuner.engines.gpu on a real GPU host (run by hand there; CI has no GPU).

    python tests/engines/gpu_probe.py

A child process takes GPU memory through torch; while it holds it, wait_free must say the GPU is
busy (naming the pid); after the child exits, wait_free must report it free again. Prints what it
saw and exits 1 on a mismatch.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tuner.engines import gpu

HOLD = (
    "import sys, time, torch\n"
    "x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda:0')\n"
    "print('holding', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def main() -> int:
    if not gpu.available():
        print("no GPU visible to NVML")
        return 1
    base = gpu.snapshot([0])
    print("baseline:", base)
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(4 * 2**30), "6"], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    child.stdout.readline()  # "holding": the memory is taken
    t = time.monotonic()
    busy = gpu.wait_free([0], base, timeout_s=1)
    print(f"while held ({time.monotonic() - t:.1f}s):", busy, gpu.snapshot([0]))
    t = time.monotonic()
    free = gpu.wait_free([0], base, timeout_s=60)
    print(f"after exit ({time.monotonic() - t:.1f}s):", free, gpu.snapshot([0]))
    child.wait()
    ok = busy[0] is False and str(child.pid) in busy[1] and free[0] is True
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
