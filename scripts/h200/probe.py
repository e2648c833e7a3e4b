"""DEVICE, command 1: what the study relies on, read on the machine itself, in a few seconds.

Prints the GPU (NVML), the image's versions of the packages the driver imports, and the GPU's
device-to-device copy bandwidth (the memory roofline's measured ceiling; the spec sheet says 4.8 TB/s),
then checks the driver's whole non-vLLM path: the study loads, the space builds and the searcher
hands out its first config (the baseline). Writes the same as JSON to argv[1].
"""

from __future__ import annotations

import importlib.metadata as md
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("torch", "numpy", "pyarrow", "aiohttp", "pyyaml", "nvidia-ml-py", "pydantic", "optuna",
                 "uvloop", "psutil", "tqdm", "packaging"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def copy_bandwidth(gib: float = 4.0, reps: int = 20) -> dict[str, float]:
    """Device-to-device copy of `gib` GiB, `reps` times: bytes read + written per second."""
    import torch

    n = int(gib * 2**30)
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        b.copy_(a)
    end.record()
    torch.cuda.synchronize()
    s = start.elapsed_time(end) / 1000
    del a, b
    torch.cuda.empty_cache()
    return {"copy_gib": gib, "reps": reps, "seconds": s, "tb_per_s": 2 * n * reps / s / 1e12}


def driver_check(study_path: Path) -> dict[str, Any]:
    from tuner.search.searcher import SearchCore  # imports no Ray (the device may have none)
    from tuner.search.space import build_space
    from tuner.spec.load import load_study

    study = load_study(study_path)
    space = build_space(study, HERE.parents[1])
    core = SearchCore(study, space)
    first = core.ask()
    return {"study": study.name, "space": space.describe(), "first_config": first}


def main() -> int:
    from gpu_sampler import gpu_state

    t0 = time.time()
    report: dict[str, Any] = {"gpu": gpu_state(0), "versions": versions()}
    try:
        report["copy_bandwidth"] = copy_bandwidth()
    except Exception as exc:  # noqa: BLE001 - report, do not stop the probe
        report["copy_bandwidth"] = {"error": repr(exc)}
    for study in sys.argv[2:]:
        try:
            report[f"driver_check:{study}"] = driver_check(Path(study))
        except Exception as exc:  # noqa: BLE001
            report[f"driver_check:{study}"] = {"error": repr(exc)}
    report["probe_s"] = round(time.time() - t0, 1)
    text = json.dumps(report, indent=1, default=str)
    print(text)
    Path(sys.argv[1]).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
