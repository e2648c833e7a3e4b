"""Where a prompt step's time goes inside vLLM's engine core, from a step trace (issue 17).

The trace (`.gpu/trace/sitecustomize.py` on the device: STEP_TRACE_DIR set, every call of the scheduler's
`schedule` (s) and `update_from_output` (u), the uni-process executor's `execute_model` (x, the step's CPU
preparation and kernel launches) and `sample_tokens` (t), and the wait for a step's output (w), each with its
start and end on CLOCK_MONOTONIC) is read with the same run's `vllm bench serve --save-detailed` file, whose
token times are on the same clock (perf_counter). Steps are matched in order: with async scheduling the engine
schedules and launches step N+1 before it waits for step N's output, so step N's tokens leave the engine core at
the end of u_N, after s/x/t of step N+1. Printed per run, by the new prompt tokens a step carries (0, one
2048-token prompt, two, three or more): medians of the CPU phases (s, x), of the wait for the GPU (w), of the
interval between two steps' outputs leaving the engine (u end to u end) for the step itself and for the step
before it, and of the client's view (a new request's first token after its step's u end).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/step_trace.py DIR [DIR ...]   # DIR: trace_NAME/ + bench_NAME_r*.json
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np


def load_trace(folder: Path) -> list[list]:
    """The engine core's records (the process that scheduled), in time order."""
    best: list[list] = []
    for f in (*folder.glob("trace.*.jsonl"), *folder.glob("trace.*.jsonl.gz")):
        with (gzip.open if f.suffix == ".gz" else open)(f, "rt") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        if sum(r[0] == "s" for r in rows) > sum(r[0] == "s" for r in best):
            best = rows
    return sorted((r for r in best if r[0] in "sxtwu" and len(r[0]) == 1), key=lambda r: r[1])


def steps(rows: Iterable[list]) -> list[dict]:
    """One dict per scheduled step with tokens: s, x, t (its own), w and u (its output), matched in order."""
    out: list[dict] = []
    pending: list[dict] = []  # launched, output not yet processed
    cur: dict | None = None
    for r in rows:
        kind = r[0]
        if kind == "s":
            cur = None
            if r[3] > 0:
                cur = {"s": (r[1], r[2]), "tokens": r[3], "new": r[4], "ptoks": r[5], "running": r[6],
                       "waiting": r[7]}
                out.append(cur)
                pending.append(cur)
        elif kind in "xt" and cur is not None:
            cur[kind] = (r[1], r[2])
        elif kind == "w" and pending:
            pending[0]["w"] = (r[1], r[2])
        elif kind == "u" and pending:
            st = pending.pop(0)
            st["u"] = (r[1], r[2])
    return [st for st in out if "u" in st]


def band(ptoks: int) -> str:
    if ptoks == 0:
        return "decode"
    k = round(ptoks / 2048)
    return "1 prompt" if k <= 1 else "2 prompts" if k == 2 else "3+ prompts"


def med(xs: list[float]) -> str:
    return f"{np.median(xs) * 1e3:6.1f}" if xs else "     -"


def read_bench(bench: Path) -> dict:
    with (gzip.open if bench.suffix == ".gz" else open)(bench, "rt") as f:
        return json.load(f)


def first_tokens(d: dict) -> list[float]:
    return [st + tt for st, tt in zip(d["start_times"], d["ttfts"], strict=True) if tt]


def launch_table(st: list[dict], ends: np.ndarray, runs: list[tuple[Path, dict]]) -> None:
    """Per run (a bench's sends to 15 s after the last) and kind of step: its launch (x: mean, cv, p10/50/90), the
    wait for its output (w), the interval that ends with the step before's tokens (before) and with its own (own), and
    how often the step before also carried prompt tokens."""
    x = np.array([(s["x"][1] - s["x"][0]) * 1e3 if "x" in s else np.nan for s in st])
    w = np.array([(s["w"][1] - s["w"][0]) * 1e3 if "w" in s else np.nan for s in st])
    pt = np.array([s["ptoks"] for s in st])
    new = np.array([s["new"] for s in st])
    starts = np.array([s["s"][0] for s in st])
    print(f"  {'run':>6s} {'step':>20s} {'n':>5s} {'x mean':>6s} {'cv':>5s} {'x p10':>6s} {'p50':>6s} {'p90':>6s} "
          f"{'w p50':>6s} {'before':>7s} {'own':>7s} {'prev prompt':>6s}   (ms; one run = its bench's sends "
          "to 15 s after the last)")
    for _, d in runs:
        t_lo, t_hi = min(d["start_times"]), max(d["start_times"]) + 15.0
        launch_rows(x, w, pt, new, ends, (starts >= t_lo) & (starts <= t_hi), f"{d['request_rate']:g}/s")


def launch_rows(x: np.ndarray, w: np.ndarray, pt: np.ndarray, new: np.ndarray, ends: np.ndarray, sel: np.ndarray,
                label: str) -> None:
    kinds = (("decode", pt == 0), (">=2048 prompt tokens", pt >= 2048), ("1 new prompt", (pt >= 2048) & (new == 1)),
             ("2 new prompts", (pt >= 2048) & (new == 2)), ("3+ new prompts", (pt >= 2048) & (new >= 3)))
    for name, m in kinds:
        idx = np.where(sel & m)[0]
        idx = idx[idx > 1]
        if len(idx) < 3:
            continue
        xs = x[idx]
        own = (ends[idx] - ends[idx - 1]) * 1e3
        before = (ends[idx - 1] - ends[idx - 2]) * 1e3
        print(f"  {label:>6s} {name:>20s} {len(idx):5d} {np.nanmean(xs):6.1f} {np.nanstd(xs) / np.nanmean(xs):5.2f} "
              f"{np.nanpercentile(xs, 10):6.1f} {np.nanmedian(xs):6.1f} {np.nanpercentile(xs, 90):6.1f} "
              f"{np.nanmedian(w[idx]):6.1f} {np.median(before):7.1f} {np.median(own):7.1f} {np.mean(pt[idx - 1] > 0):6.2f}")


def wpct(x: np.ndarray, w: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """Weighted percentiles (each value counted w times)."""
    o = np.argsort(x)
    cw = np.cumsum(w[o]) / np.sum(w)
    return np.array([x[o][min(np.searchsorted(cw, q / 100), len(x) - 1)] for q in qs])


def tail_table(st: list[dict], ends: np.ndarray, runs: list[tuple[Path, dict]]) -> None:
    """Where the client's inter-token gaps come from, as distributions (a token-by-token match is not reliable: the
    API server hands tokens out in bursts). Every running request gets one token per step (no preemptions in these
    runs), so the engine's ITL distribution is its output intervals (u end to u end) counted once per request
    running in the later step. Per run (a bench's sends to 15 s after the last): client P50 / P90 / P99 ITL against
    the engine's, and for the engine's intervals at or above its P99 the share whose step, or the step after (async
    scheduling launches it before handing out the step's tokens), carries prompt work, and their median launch sum."""
    heavy = np.array([s["tokens"] - s["running"] >= 256 for s in st] + [False])
    launch = np.array([(s["x"][1] - s["x"][0]) if "x" in s else 0.0 for s in st] + [0.0])
    starts = np.array([s["s"][0] for s in st])
    running = np.array([s["running"] for s in st], dtype=float)
    print(f"  {'run':>6s} {'client p50/p90/p99':>20s} {'engine p50/p90/p99':>20s} {'n>=p99':>6s} {'prompt':>6s} "
          f"{'launch':>6s}   (ms)")
    for _, d in runs:
        itl = np.concatenate([np.asarray(x) for x in d["itls"] if x]) * 1e3
        t_lo, t_hi = min(d["start_times"]), max(d["start_times"]) + 15.0
        i = np.where((starts[1:] >= t_lo) & (starts[1:] <= t_hi))[0] + 1
        gap, w = (ends[i] - ends[i - 1]) * 1e3, running[i]
        pe = wpct(gap, w, (50, 90, 99))
        m = i[gap >= pe[2]]
        print(f"  {d['request_rate']:>5g}/s {'/'.join(f'{v:.1f}' for v in np.percentile(itl, [50, 90, 99])):>20s} "
              f"{'/'.join(f'{v:.1f}' for v in pe):>20s} {len(m):6d} {np.mean(heavy[m] | heavy[m + 1]):6.2f} "
              f"{np.median(launch[m] + launch[m + 1]) * 1e3:6.1f}")


def report(folder: Path) -> None:
    rows = load_trace(folder)
    st = steps(rows)
    if not st:
        print(f"{folder}: no steps traced")
        return
    ends = np.array([s["u"][1] for s in st])
    gaps = np.diff(ends)
    print(f"{folder.name}: {len(st)} steps traced")
    print(f"  {'step':>10s} {'n':>5s} {'sched':>6s} {'exec x':>6s} {'wait w':>6s} {'upd u':>6s} {'out-out':>7s} "
          f"{'before':>7s} {'x->u_prev':>9s}   (medians, ms; out-out: this step's output after the previous one's; "
          "before: the previous step's out-out; x->u_prev: the previous step's output leaves this long after "
          "this step's x ends)")
    for b in ("decode", "1 prompt", "2 prompts", "3+ prompts"):
        idx = [i for i in range(1, len(st)) if band(st[i]["ptoks"]) == b]
        if not idx:
            continue

        def pick(k: str, idx: list[int] = idx) -> list[float]:
            return [st[i][k][1] - st[i][k][0] for i in idx if k in st[i]]
        lag = [st[i - 1]["u"][1] - st[i]["x"][1] for i in idx if "x" in st[i]]
        before = [gaps[i - 2] for i in idx if i >= 2]
        print(f"  {b:>10s} {len(idx):5d} {med(pick('s'))} {med(pick('x'))} {med(pick('w'))} {med(pick('u'))} "
              f"{med([gaps[i - 1] for i in idx]):>7s} {med(before):>7s} {med(lag):>9s}")
    prompt_steps = {i for i, s in enumerate(st) if s["new"]}
    runs = [(b, read_bench(b)) for b in sorted(folder.parent.glob(f"bench_{folder.name.removeprefix('trace_')}_r*.json*"))]
    launch_table(st, ends, runs)
    tail_table(st, ends, runs)
    for bench, d in runs:
        firsts = np.sort(first_tokens(d))
        firsts = firsts[(firsts >= ends[0]) & (firsts <= ends[-1])]
        if not len(firsts):
            continue
        j = np.searchsorted(ends, firsts) - 1  # the last step output before the client saw the first token
        lat = [firsts[k] - ends[j[k]] for k in range(len(firsts)) if j[k] in prompt_steps]
        print(f"  {bench.name}: first tokens {len(firsts)}; after their step's output left the engine core "
              f"(median) {med(lat)} ms")


def main() -> None:
    for arg in sys.argv[1:]:
        report(Path(arg))


if __name__ == "__main__":
    main()
