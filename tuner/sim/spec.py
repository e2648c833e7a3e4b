"""Speculative decoding in the simulator: how many tokens a verify step yields, and what drafting costs.

Acceptance: each draft token is accepted with probability a, independently, until the first miss
(the standard model of Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
Decoding"), so a verify step of k draft tokens yields tau(k) = (1 - a^(k+1)) / (1 - a) tokens. A study
gives the mean acceptance length tau at some k per method (study.speculative.methods.<m>
.acceptance_length / at_tokens); a is solved from it, so searching k trades longer drafts against
rejected work. Without a study figure the defaults below are used: they come from published reports
on real text and greedy sampling, are NOT calibrated on servetune's own runs, and real acceptance
depends on the text (with random weights or random-token prompts it is about 1: no gain, all cost).
Measured on real vLLM 0.26 n-gram runs at the engine's own acceptance (benchmarks/sim_spec_check.py, docs/sim.md):
these costs read P50 TPOT ~25 % short with the CPU drafter (async scheduling off) and the GPU one (on) alike;
Calibration.spec_step_s (a fixed time per verify step, 1.9 ms fitted on the H200) brings that within ~4 % but is off
as shipped: its held-out rule was not met (P99 TPOT stayed 15 % short).

Draft cost (per verify step, n decoding sequences; see StepCost.spec_draft_time):
  ngram   CPU n-gram lookup, DRAFT_NGRAM_S per sequence (vLLM turns async scheduling off for it);
  ngram_gpu  vLLM's n-gram lookup as one GPU kernel pass, DRAFT_PASS_S (async scheduling stays on);
  eagle3  k autoregressive passes of a `draft_layers`-layer head at the target's width plus its
          own lm_head over DRAFT_VOCAB_EAGLE3 tokens;
  mtp     like eagle3 with the target's full lm_head (the model's own MTP layer);
  dflash  one non-causal pass of `draft_layers` layers over the k+1-token block, then the target's
          lm_head over the k drafts (z-lab DFlash: a 5-layer Qwen3-style drafter, block of 16).
Each draft pass also pays DRAFT_PASS_S of launch overhead. Verify is the target's own step over
k+1 tokens per sequence: cheap while decode is memory-bound (small batches), about k+1 times the
compute once it is compute-bound, so the gain falls with batch size and turns into a loss.

Per-batch-size K (vLLM >= 0.25, `num_speculative_tokens_per_batch_size` in `--speculative-config`: a
list of inclusive `[start, end, K]` batch-size ranges, the first starting at 1; gaps and the tail keep
the previous K; each K capped at `num_speculative_tokens`, the startup maximum; K = 0 means no drafting
at that batch size): `SpecPlan.schedule` is the dense K per running batch size, and the step cost of a
step with n decoding sequences is the fixed-K cost at K(n) (tuner.sim.cost.StepCost.for_n).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.common.errors import EngineStartError
from tuner.trial.outcome import TrialOutcome

# (tau, at k): mean tokens per verify step on real text, greedy. Sources in docs/sim.md ("Levers").
DEFAULT_ACCEPTANCE: dict[str, tuple[float, int]] = {
    "ngram": (1.5, 3),  # prompt lookup: gains on copy-heavy text only (vLLM docs: "modest speedups")
    "ngram_gpu": (1.5, 3),  # the same lookup as a GPU kernel (vLLM 0.26 has it): the same acceptance
    "eagle3": (2.9, 3),  # EAGLE-3 chain drafts on chat (MT-Bench-like) at k=3
    "mtp": (1.85, 1),  # DeepSeek-V3 report: second-token acceptance 85-90%
    "dflash": (5.0, 15),  # DFlash on Qwen3 targets, block 16: ~6-8 on math/code, lower on chat
}
DEFAULT_DRAFT_LAYERS = {"ngram": 0, "ngram_gpu": 0, "eagle3": 1, "mtp": 1, "dflash": 5}
DRAFT_VOCAB_EAGLE3 = 32000  # EAGLE-3 heads predict over a reduced draft vocabulary
DRAFT_NGRAM_S = 5e-6  # per sequence per step, CPU (uncalibrated)
DRAFT_PASS_S = 40e-6  # per draft forward pass: graph launch and sync (uncalibrated)
AUTOREGRESSIVE = ("eagle3", "mtp")
_SGLANG = {"NGRAM": "ngram", "EAGLE": "eagle3", "EAGLE3": "eagle3", "NEXTN": "mtp", "DFLASH": "dflash"}


@dataclass(frozen=True, slots=True)
class SpecPlan:
    method: str  # ngram | ngram_gpu | eagle3 | mtp | dflash
    k: int  # draft tokens per verify step
    tau: float  # expected tokens per verify step (1 <= tau <= k + 1)
    draft_layers: int
    passes: int  # draft forward passes per verify step
    schedule: tuple[int, ...] | None = None  # K by running batch size (index 0 unused); None: always k

    @property
    def width(self) -> int:
        """Tokens each decoding sequence feeds the target per verify step."""
        return self.k + 1


def acceptance_rate(tau: float, k: int) -> float:
    """The per-token acceptance a with (1 - a^(k+1)) / (1 - a) = tau (bisection; tau clipped to [1, k+1])."""
    tau = min(max(tau, 1.0), k + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        if expected_tokens(a, k) < tau:
            lo = a
        else:
            hi = a
    return (lo + hi) / 2


def expected_tokens(a: float, k: int) -> float:
    if a >= 1.0:
        return k + 1.0
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def plan(flavour: str, cfg: dict[str, Any], methods: dict[str, dict[str, Any]] | None = None) -> SpecPlan | None:
    """The speculative setup a resolved config asks for, or None. `methods`: study figures per method."""
    if flavour == "vllm":
        sc = cfg.get("speculative_config")
        if not sc:
            return None
        method = str(sc.get("method") or "")
        if not method and sc.get("model"):
            method = "dflash" if "dflash" in str(sc["model"]).lower() else "eagle3"
        if method in ("eagle", "deepseek_mtp", "qwen3_next_mtp"):
            method = "eagle3" if method == "eagle" else "mtp"
        k = int(sc.get("num_speculative_tokens") or 0)
        passes_hint = None
        per_bs = sc.get("num_speculative_tokens_per_batch_size")
    else:
        algo = cfg.get("speculative_algorithm")
        if not algo:
            return None
        method = _SGLANG.get(str(algo).upper(), "")
        steps = cfg.get("speculative_num_steps") or 3
        draft = cfg.get("speculative_num_draft_tokens") or (16 if method == "dflash" else steps + 1)
        k = int(draft) - 1
        passes_hint = int(steps)
        per_bs = None
    if method not in DEFAULT_ACCEPTANCE:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: speculative method {method!r} is not supported "
                               f"by the simulator (known: {sorted(DEFAULT_ACCEPTANCE)})")
    if k < 1:
        raise EngineStartError(TrialOutcome.START_FAILED, "ValueError: num_speculative_tokens must be >= 1 "
                               f"(got {k}) for speculative method {method!r}")
    given = (methods or {}).get(method) or {}
    tau_ref, k_ref = DEFAULT_ACCEPTANCE[method]
    if given.get("acceptance_length"):
        tau_ref = float(given["acceptance_length"])
        k_ref = int(given.get("at_tokens") or k_ref)
    a = acceptance_rate(tau_ref, k_ref)
    layers = given.get("draft_layers")
    layers = DEFAULT_DRAFT_LAYERS[method] if layers is None else int(layers)
    passes = 0 if method == "ngram" else (passes_hint or k) if method in AUTOREGRESSIVE else 1  # ngram_gpu: 1
    schedule = None if per_bs is None else dense_schedule(per_bs, int(cfg.get("max_num_seqs") or 1), k)
    return SpecPlan(method, k, expected_tokens(a, k), layers, passes, schedule)


def at_k(p: SpecPlan, k: int, methods: dict[str, dict[str, Any]] | None = None) -> SpecPlan:
    """The same method with a fixed k (one entry of a per-batch-size schedule), acceptance re-derived."""
    given = (methods or {}).get(p.method) or {}
    tau_ref, k_ref = DEFAULT_ACCEPTANCE[p.method]
    if given.get("acceptance_length"):
        tau_ref, k_ref = float(given["acceptance_length"]), int(given.get("at_tokens") or k_ref)
    passes = 0 if p.method == "ngram" else k if p.method in AUTOREGRESSIVE else 1
    return SpecPlan(p.method, k, expected_tokens(acceptance_rate(tau_ref, k_ref), k), p.draft_layers, passes)


def _bad(what: str) -> EngineStartError:
    return EngineStartError(TrialOutcome.START_FAILED, f"ValueError: num_speculative_tokens_per_batch_size: {what}")


def dense_schedule(entries: Any, max_batch: int, k_max: int) -> tuple[int, ...]:
    """K for every batch size 1..max_batch from `[[start, end, K], ...]`, with the engine's rules (module doc):
    an invalid schedule fails the start as vLLM's config check does."""
    if not isinstance(entries, list) or not entries:
        raise _bad("must be a non-empty list of [start, end, K] entries")
    ranges: list[tuple[int, int, int]] = []
    for e in entries:
        if not isinstance(e, (list, tuple)) or len(e) != 3:
            raise _bad(f"entry {e!r} is not [start, end, K]")
        lo, hi, k = (int(v) for v in e)
        if lo <= 0 or hi < lo or k < 0:
            raise _bad(f"entry {e!r}: needs 1 <= start <= end and K >= 0")
        ranges.append((lo, hi, k))
    ranges.sort()
    if ranges[0][0] != 1:
        raise _bad("the first range must start at batch size 1")
    if any(b[0] <= a[1] for a, b in zip(ranges, ranges[1:], strict=False)):
        raise _bad("ranges overlap")
    out = [0] * (max_batch + 1)
    i, current = 0, ranges[0][2]
    for n in range(1, max_batch + 1):
        while i < len(ranges) and ranges[i][0] <= n:
            current = ranges[i][2]
            i += 1
        out[n] = min(current, k_max)  # a gap or the tail keeps the previous range's K
    return tuple(out)
