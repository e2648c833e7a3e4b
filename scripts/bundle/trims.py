"""What may be removed from the unpacked tree: only files nothing loads in the named situation.

Each rule names the situation it is proven for; `--trim NAME` applies it. A rule whose paths are
absent does nothing (another version of the package)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Trim:
    name: str
    paths: tuple[str, ...]
    why: str


RULES: dict[str, Trim] = {t.name: t for t in (
    Trim("bin", ("bin",),
         "console scripts written by `pip install --target` name the build machine's interpreter in their "
         "shebang; on the host every tool runs as `python3 -m ...`"),
    Trim("vllm-sm90-dense", (
        "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/_moe_C_stable_libtorch.abi3.so", "vllm/vllm-rs",
        "vllm/third_party/deep_gemm", "vllm/third_party/fmha_sm100"),
         "on Hopper (SM90) vLLM picks FlashAttention 3, so the FA2 library is never opened; the MoE library's "
         "import is wrapped in suppress(ImportError) and only MoE models call it; vllm-rs runs only with "
         "VLLM_USE_RUST_FRONTEND; DeepGEMM is used only when VLLM_USE_DEEP_GEMM and block-FP8 weights; "
         "fmha_sm100 is Blackwell-only. Not for MoE models, block-quantised FP8 checkpoints or SM100 GPUs"),
    Trim("ray-local", ("ray/jars", "ray/rllib"),
         "Java workers (jars) and RLlib are separate libraries servetune never imports. Kept, found on the "
         "H200 (round 3): ray/llm (the promoted apps are Ray Serve LLM apps) and dashboard/client (without "
         "its build folder `ray start --head` runs no dashboard, so there is no REST API for Serve deploys)"),
    Trim("static-libs", ("**/*.a",),
         "static archives (.a) are inputs to a C/C++ linker; the Python import system and dlopen never read "
         "them (xgrammar ships a 65 MB one for C++ users)"),
    Trim("mlflow-ui", ("mlflow/server/js",),
         "the MLflow web UI's static build, read only by `mlflow server`/`mlflow ui`; the tracking client and "
         "its SQLite store never open it (browse the store on another machine, or keep this rule off)"),
)}


def apply(site: Path, names: list[str]) -> list[tuple[str, str, int]]:
    """Remove each rule's paths from `site`; returns (rule, path, bytes removed)."""
    unknown = sorted(set(names) - set(RULES))
    if unknown:
        raise SystemExit(f"error: unknown --trim {unknown}; fix: choose from {sorted(RULES)}")
    done = []
    for name in names:
        for pattern in RULES[name].paths:
            for p in sorted(site.glob(pattern)) if "*" in pattern else [site / pattern]:
                if not p.exists():
                    continue
                size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                done.append((name, str(p.relative_to(site)), size))
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    return done
