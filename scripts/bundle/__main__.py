"""scripts/bundle: an offline bundle of what `pip install ".[EXTRA]"` needs that a target image lacks.

    python scripts/bundle --extra vllm --chunk-size 40MiB --out .gpu/bundle \\
        --target-has scripts/bundle/targets/h200-cuda.txt --engine-lock scripts/bundle/locks/vllm-0.26.0.txt \\
        --trim bin vllm-sm90-dense ray-local mlflow-ui

Run on a machine with a package index (docs/cluster.md). Out: chunk_000.., SHA256SUMS, manifest.json,
install.sh, check_imports.py. On the host: `bash install.sh --check`, then `source DEST/env.sh`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import closure  # noqa: E402
import pack  # noqa: E402
import trims  # noqa: E402
import wheels  # noqa: E402

ROOT = HERE.parents[1]
# Modules the engine's OpenAI server loads to serve a dense model (vLLM 0.26.0: found by importing
# until nothing was missing, ../shared/gpu/README.md gotcha 4) plus the FP8 paths servetune searches.
ENGINE_IMPORTS = {
    "vllm": ["vllm", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main", "vllm.v1.engine.core",
             "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner", "vllm.model_executor.models.qwen3",
             "vllm.v1.attention.backends.flash_attn", "vllm.model_executor.model_loader.dummy_loader",
             "vllm.model_executor.layers.quantization.fp8", "vllm.v1.sample.sampler"],
    "sglang": ["sglang", "sglang.launch_server", "sglang.srt.entrypoints.http_server",
               "sglang.srt.managers.scheduler", "sglang.srt.models.qwen3"],
}


def servetune_modules(root: Path) -> list[str]:
    """Every module of tuner/ and serve_apps/ (not __main__, which runs on import)."""
    mods = []
    for pkg in ("tuner", "serve_apps"):
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods.append(".".join(parts))
    return mods


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scripts/bundle", description=__doc__.splitlines()[0])
    p.add_argument("--extra", choices=["vllm", "sglang"], default=None, help="the engine extra (none: servetune only)")
    p.add_argument("--out", type=Path, required=True, help="output folder (its chunk_* are replaced)")
    p.add_argument("--chunk-size", default="40MiB", help="largest chunk, e.g. 40MiB, 2GiB (default 40MiB)")
    p.add_argument("--python-version", default="3.12", help="the target's Python (default 3.12)")
    p.add_argument("--target-has", type=Path, default=None,
                   help="what the target image already has: name or name==version per line")
    p.add_argument("--engine-lock", type=Path, default=None, help="name==version lines proven for the engine")
    p.add_argument("--reference-python", default=str(ROOT / ".venv" / "bin" / "python"),
                   help="an interpreter where servetune's dependencies are installed and tested (versions come from it)")
    p.add_argument("--trim", nargs="*", default=["bin"], help=f"rules from {sorted(trims.RULES)} (default: bin)")
    p.add_argument("--xz-level", default="9", help="xz preset, 0-9 (default 9)")
    p.add_argument("--wheel-cache", type=Path, default=Path("/tmp/servetune-bundle-wheels"))
    p.add_argument("--plan-only", action="store_true", help="print what would be carried and stop")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    chunk = pack.parse_size(a.chunk_size)
    if a.extra and a.engine_lock is None:
        print(f"error: --extra {a.extra} needs --engine-lock (the engine's proven versions); fix: e.g. "
              f"--engine-lock scripts/bundle/locks/vllm-0.26.0.txt", file=sys.stderr)
        return 2
    for f in (a.target_has, a.engine_lock):
        if f is not None and not f.is_file():
            print(f"error: {f} does not exist; fix: give an existing file", file=sys.stderr)
            return 2
    needs, problems = closure.plan(ROOT / "pyproject.toml", a.extra, a.reference_python, a.engine_lock,
                                   a.target_has, a.python_version)
    if problems:
        print("error: the closure is inconsistent:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    closure.main_print(needs)
    print(f"{len(needs)} distributions to carry", file=sys.stderr)
    if a.plan_only:
        return 0
    t0 = time.monotonic()
    got = wheels.download(needs, a.wheel_cache / f"py{a.python_version}", a.python_version)
    extras = {"ray": {"tune", "serve"}}
    target = closure.read_target(a.target_has) if a.target_has else {}
    issues, asked = wheels.check(got, target, a.python_version, extras)
    locked = set(closure.read_lock(a.engine_lock)) if a.engine_lock else set()
    hard = [t for n, t in issues if n not in locked]
    soft = [t for n, t in issues if n in locked]
    if soft:
        print(f"note: {len(soft)} requirement(s) the engine declares are not carried (the lock was proven by "
              "importing the server; check_imports.py checks it again):\n  " + "\n  ".join(soft), file=sys.stderr)
    if hard:
        print("error: carried wheels ask for what neither the bundle nor the target has:\n  " + "\n  ".join(hard),
              file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.wheel_cache / "build"
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    key = {"wheels": sorted(p.name for p in got.values()), "trim": a.trim}
    marker = site / ".bundle-tree.json"
    old = json.loads(marker.read_text()) if marker.is_file() else {}
    if old.get("key") == key:  # the same wheels and trims: re-compress or re-cut without unpacking again
        raw, removed = old["raw"], [tuple(r) for r in old["removed"]]
    else:
        pack.unpack(sorted(got.values()), site, a.python_version)
        raw = pack.tree_size(site)
        removed = trims.apply(site, a.trim)
        marker.write_text(json.dumps({"key": key, "raw": raw, "removed": removed}))
    tarball = work / "site.tar.xz"
    pack.compress(site, tarball, a.xz_level)
    parts = pack.split(tarball, a.out, chunk)
    manifest = {
        "extra": a.extra, "python_version": a.python_version, "engines": [a.extra] if a.extra else [],
        "wheels": {n: {"file": p.name, "sha256": wheels.sha256(p)} for n, p in sorted(got.items())},
        "trimmed": [{"rule": r, "path": p, "bytes": b, "why": trims.RULES[r].why} for r, p, b in removed],
        "tree_bytes": raw, "tree_bytes_trimmed": pack.tree_size(site), "tarball": "site.tar.xz",
        "tarball_bytes": tarball.stat().st_size, "tarball_sha256": wheels.sha256(tarball), "chunks": parts,
        "target_requirements": asked,
        "imports": servetune_modules(ROOT) + ENGINE_IMPORTS.get(a.extra or "", []),
    }
    pack.write_manifest(a.out, manifest)
    for f in ("install.sh", "check_imports.py"):
        shutil.copy2(HERE / f, a.out / f)
    print(json.dumps({"wheels": len(got), "tree_MB": round(raw / 1e6, 1),
                      "trimmed_MB": round(sum(b for *_, b in removed) / 1e6, 1),
                      "tarball_MB": round(tarball.stat().st_size / 1e6, 1), "chunks": len(parts),
                      "seconds": round(time.monotonic() - t0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
