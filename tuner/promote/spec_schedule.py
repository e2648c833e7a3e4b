"""Per-batch-size speculative tokens for the promoted config, chosen from the study's own measurements.

How many draft tokens pay depends on load: verifying k+1 tokens is nearly free while decode is
memory-bound (small batches) and costs about k+1 times the compute once it is compute-bound. vLLM
>= 0.25 takes a schedule inside `--speculative-config`: `num_speculative_tokens_per_batch_size`, a list
of inclusive `[start, end, K]` batch-size ranges (the first starting at 1, gaps and the tail keeping the
previous K, each K capped at `num_speculative_tokens`; vllm/config/speculative.py, PR #32374).

The choice uses only trials that ran the winner's config with a different fixed
`num_speculative_tokens` (everything else equal), so K is the only difference. Every load point of
those trials is one measurement: its decode batch size, by Little's law (completed requests per second
x mean decode time, E2E - TTFT), and its mean TPOT (at a given batch size, lower TPOT is more decode
throughput). Batch sizes are split into power-of-two bands; the K that reached a band are compared at one
batch size in it (its middle, or the largest batch all of them reached), each K's TPOT interpolated
linearly between its own measured points (never extrapolated); in each band reached by two or more K the
lowest TPOT wins; adjacent bands with the same K merge. Nothing is chosen (the
winner keeps its fixed K, and the reason says why) when the winner is not vLLM speculative decoding,
fewer than two K were measured, or one K wins every band.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.trial.result import TrialResult

KEY = "num_speculative_tokens_per_batch_size"
MIN_VLLM = "0.25"  # first vLLM release documenting the key (docs.vllm.ai/en/v0.25.0, dynamic speculative decoding)


@dataclass
class SpecSchedule:
    """The chosen schedule (None: keep the fixed K) with the measurements behind it."""

    entries: list[list[int]] | None
    reason: str
    bands: list[dict[str, Any]] = field(default_factory=list)  # per band: batch range, mean TPOT per K, best K

    def apply(self, args: dict[str, Any]) -> dict[str, Any]:
        """The engine args with the schedule in `speculative_config` (`num_speculative_tokens` = its largest K,
        the startup maximum vLLM sizes drafting for)."""
        if self.entries is None:
            return dict(args)
        sc = dict(args["speculative_config"])
        sc["num_speculative_tokens"] = max(1, max(k for _, _, k in self.entries))
        sc[KEY] = [list(e) for e in self.entries]
        return {**args, "speculative_config": sc}


def batch_size(point: dict[str, Any]) -> float | None:
    """Decoding sequences in flight at a load point (Little's law on the measured requests)."""
    rps, e2e, ttft = point.get("request_throughput"), point.get("mean_e2el_ms"), point.get("mean_ttft_ms")
    if not rps or e2e is None or ttft is None or e2e <= ttft:
        return None
    return float(rps) * (float(e2e) - float(ttft)) / 1000.0


def _interp(pts: list[tuple[float, float]], b: float) -> float | None:
    """TPOT at batch size b from one K's (batch, TPOT) points, inside their range only."""
    if not pts or b < pts[0][0] or b > pts[-1][0]:
        return None
    for (b0, t0), (b1, t1) in zip(pts, pts[1:], strict=False):
        if b0 <= b <= b1:
            return t0 if b1 == b0 else t0 + (t1 - t0) * (b - b0) / (b1 - b0)
    return pts[0][1]


def _without_k(args: dict[str, Any]) -> tuple[str, ...]:
    sc = {k: v for k, v in (args.get("speculative_config") or {}).items() if k not in ("num_speculative_tokens", KEY)}
    rest = {k: v for k, v in args.items() if k != "speculative_config"}
    return repr(sorted(rest.items())), repr(sorted(sc.items()))


def choose(winner: TrialResult, trials: list[TrialResult], flavour: str) -> SpecSchedule:
    """The per-batch-size K for `winner` from `trials` (see the module doc)."""
    sc = winner.args.get("speculative_config")
    if flavour != "vllm" or not isinstance(sc, dict) or not sc.get("method"):
        return SpecSchedule(None, "not chosen: the winner does not use vLLM speculative decoding")
    same = _without_k(winner.args)
    by_k: dict[int, list[tuple[float, float]]] = {}
    for t in trials:
        if t.engine != winner.engine or not t.outcome.ran or _without_k(t.args) != same:
            continue
        k = int((t.args.get("speculative_config") or {}).get("num_speculative_tokens") or 0)
        for p in t.points:
            b, tpot = batch_size(p), p.get("mean_tpot_ms")
            if b is not None and tpot:
                by_k.setdefault(k, []).append((b, float(tpot)))
    for pts in by_k.values():
        pts.sort()
    if len(by_k) < 2:
        return SpecSchedule(None, f"not chosen: the winner's config was measured at K={sorted(by_k)} only; a "
                                  "schedule needs trials of the same config at two or more num_speculative_tokens")
    top = max(b for pts in by_k.values() for b, _ in pts)
    bands: list[dict[str, Any]] = []
    lo = 1
    while lo <= top:
        hi = lo * 2 - 1
        # every K that reached the band is compared at one batch size: the band's middle, or the largest
        # batch all of them reached (a K left out of a band it never reached could win it by default)
        reach = {k: pts for k, pts in by_k.items() if pts[-1][0] >= lo}
        mid = min([(lo * hi) ** 0.5, *(pts[-1][0] for pts in reach.values())])
        at = {k: v for k, pts in sorted(reach.items()) if (v := _interp(pts, mid)) is not None}
        best = min(at, key=lambda k: at[k]) if len(at) >= 2 else None
        bands.append({"batch": [lo, hi], "tpot_ms_at": round(mid, 2),
                      "tpot_ms": {str(k): round(v, 3) for k, v in at.items()}, "best_k": best})
        lo *= 2
    decided = [band for band in bands if band["best_k"] is not None]
    if not decided:
        return SpecSchedule(None, "not chosen: no batch-size band was reached by two or more K", bands)
    entries: list[list[int]] = []
    for band in decided:
        lo, hi = band["batch"]
        if entries and entries[-1][2] == band["best_k"]:
            entries[-1][1] = hi
        else:
            entries.append([lo, hi, band["best_k"]])
    entries[0][0] = 1  # vLLM needs the first range at 1; smaller batches take the smallest band's K
    for below, above in zip(entries, entries[1:], strict=False):
        below[1] = above[0] - 1  # an unmeasured gap keeps the K below it, as vLLM does
    if len(entries) == 1:
        return SpecSchedule(None, f"not chosen: K={entries[0][2]} had the lowest TPOT in every measured batch-size "
                                  "band; a fixed value is the same schedule", bands)
    said = ", ".join(f"batch {lo}-{hi}: K={k}" for lo, hi, k in entries)
    return SpecSchedule(entries, f"per-batch-size speculative tokens from {len(by_k)} measured K ({sorted(by_k)}): "
                                 f"{said} (lowest TPOT per band; vLLM >= {MIN_VLLM})", bands)
