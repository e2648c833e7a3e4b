"""What a new prompt does to the engine's step timeline, measured vs simulated (issue 17's prompt deferral).

Every streamed token of every request, pooled and sorted, falls into clusters (one engine step's outputs, read by the
client within a few ms); the gaps between clusters are the step intervals. For each *isolated* prompt (no other first
token within 0.15 s, no other send from 0.15 s before it to its first token) the intervals ending at the steps around the one that carried its first token (i-2 .. i+2) are printed
as medians, minus the median decode-only interval, with TTFT and the number of steps from its send to its first token.
The same is done on the simulator's token times for the same sends and lengths, so the two timelines are compared
the same way: how large the prompt's extra time is (its sum) and how it splits between the interval before the first
token and the one that ends with it (the share the simulator defers).

Then the tail (what sets P99 ITL): the step intervals at or above the run's 99th percentile of intervals, and of those
the share that ends with new requests' first tokens ("with") and the share that ends without any while the next
interval brings some ("before": the prompts' work came before their first tokens' interval, the simulator's deferral).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/prompt_steps.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.load.records import Request, RequestRecord
from tuner.sim.cost import Calibration
from tuner.sim.detailed import BenchRun, bench_requests
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, RECORDS, RefPoint, client_arrivals, detailed_run, replay_requests

GAP_S = 0.0015  # a larger gap between two pooled token times separates two steps
ISOLATED_S = 0.15  # no other first token within this of the prompt's own, and no other send during its TTFT
Timeline = list[tuple[float, float, np.ndarray]]  # per request: send, first token, every token time (s)


def from_records(recs: list[RequestRecord]) -> Timeline:
    return [(r.sent_s, float(r.first_token_s), np.asarray(r.token_times, dtype=float))
            for r in recs if r.ok and r.first_token_s is not None]


def from_run(run: BenchRun) -> Timeline:
    """Absolute token times of a detailed bench run (needs start_times): send + TTFT + the cumulated ITLs."""
    assert run.start_times is not None, "token times need the client's start_times"
    out = []
    for s, t, itl in zip(run.start_times, run.ttfts, run.itls, strict=True):
        first = s + t
        out.append((s, first, np.concatenate([[first], first + np.cumsum(itl)])))
    return out


def around_prompts(tl: Timeline) -> tuple[np.ndarray, float, int]:
    """(rows of [intervals ending at i-2..i+2 minus base, TTFT ms, steps send->first], base ms, isolated count)."""
    allt = np.sort(np.concatenate([t for _, _, t in tl]))
    cut = np.where(np.diff(allt) > GAP_S)[0]
    ends = np.concatenate([allt[cut], allt[-1:]])
    dur = np.diff(ends) * 1e3  # dur[j - 1]: the interval ending at step j
    base = float(np.median(dur))
    sends = np.array([s for s, _, _ in tl])
    firsts = np.array([f for _, f, _ in tl])
    rows = []
    for k, (s, f, _) in enumerate(tl):
        near = np.abs(firsts - f)
        near[k] = np.inf
        busy = (sends > s - ISOLATED_S) & (sends < f)
        busy[k] = False
        i = int(np.searchsorted(ends, f - GAP_S))
        if near.min() > ISOLATED_S and not busy.any() and 3 <= i < len(dur) - 3:
            rows.append([dur[j - 1] - base for j in range(i - 2, i + 3)]
                        + [(f - s) * 1e3, i - int(np.searchsorted(ends, s))])
    return np.array(rows).reshape(-1, 7), base, len(rows)


def tail_split(tl: Timeline) -> tuple[int, float, float, float]:
    """(intervals at or above the 99th percentile of intervals, that P99 ms, share 'with', share 'before')."""
    allt = np.sort(np.concatenate([t for _, _, t in tl]))
    cut = np.where(np.diff(allt) > GAP_S)[0]
    ends = np.concatenate([allt[cut], allt[-1:]])
    dur = np.diff(ends) * 1e3  # dur[j]: the interval ending at ends[j + 1]
    firsts = np.array([f for _, f, _ in tl])
    cnt = np.bincount(np.searchsorted(ends, firsts - GAP_S), minlength=len(ends) + 2)
    p99 = float(np.percentile(dur, 99))
    top = np.where(dur >= p99)[0]
    with_ = sum(cnt[j + 1] > 0 for j in top)
    before = sum(cnt[j + 1] == 0 and cnt[j + 2] > 0 for j in top)
    return len(top), p99, with_ / len(top), before / len(top)


def sim_timeline(point: RefPoint, reqs: list[Request], cal: Calibration | None = None) -> Timeline:
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=point.shape, args=point.args,
                          max_model_len=point.max_model_len, calibration=cal)
    return from_records(eng.run(reqs))


def report(name: str, real: Timeline, sim: Timeline) -> None:
    for who, tl in (("real", real), ("sim", sim)):
        rows, base, n = around_prompts(tl)
        if not n:
            print(f"{name:40s} {who:4s} no isolated prompt")
            continue
        med = np.median(rows, axis=0)
        extra = med[:5]
        print(f"{name:40s} {who:4s} n={n:3d} base {base:5.1f} ms | i-2..i+2 extra "
              + " ".join(f"{x:6.1f}" for x in extra)
              + f" | sum(i-1,i,i+1) {extra[1:4].sum():6.1f} | share at i {extra[2] / max(extra[1:4].sum(), 1e-9):4.2f}"
              + f" | TTFT {med[5]:6.1f} ms, steps {med[6]:.0f}")
    for who, tl in (("real", real), ("sim", sim)):
        n, p99, with_, before = tail_split(tl)
        print(f"{name:40s} {who:4s} tail: {n:3d} intervals >= P99 {p99:6.1f} ms: first tokens at their end {with_:4.2f},"
              f" only at the next one's {before:4.2f}")


def main() -> None:
    by_name = {p.name: p for p in ALL_POINTS}
    for name in RECORDS:
        reqs, recs = replay_requests(name)
        report(name.replace("max_num_batched_tokens", "mbt").replace("max_num_seqs", "mns"),
               from_records(recs), sim_timeline(by_name[name], reqs))
    for p in ALL_POINTS:
        run = detailed_run(p)
        if run is None or run.start_times is None:
            continue
        report(p.name, from_run(run), sim_timeline(p, bench_requests(run, client_arrivals(p))))


if __name__ == "__main__":
    main()
