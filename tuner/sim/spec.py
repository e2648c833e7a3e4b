"""Speculative decoding in the simulator: how many tokens a verify step yields, and what drafting costs.

Acceptance: each draft token is accepted with probability a, independently, until the first miss
(the standard model of Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
Decoding"), so a verify step of k draft tokens yields tau(k) = (1 - a^(k+1)) / (1 - a) tokens. A study
gives the mean acceptance length tau at some k per method (study.speculative.methods.<m>
.acceptance_length / at_tokens); a is solved from it, so searching k trades longer drafts against
rejected work. Without a study figure the defaults below are used: they come from published reports
on real text and greedy sampling, are NOT calibrated on servetune's own runs, and real acceptance
depends on the text (with random weights or random-token prompts it is about 1: no gain, all cost).

Draft cost (per verify step, n decoding sequences; see StepCost.spec_draft_time):
  ngram   CPU n-gram lookup, DRAFT_NGRAM_S per sequence;
  eagle3  k autoregressive passes of a `draft_layers`-layer head at the target's width plus its
          own lm_head over DRAFT_VOCAB_EAGLE3 tokens;
  mtp     like eagle3 with the target's full lm_head (the model's own MTP layer);
  dflash  one non-causal pass of `draft_layers` layers over the k+1-token block, then the target's
          lm_head over the k drafts (z-lab DFlash: a 5-layer Qwen3-style drafter, block of 16).
Each draft pass also pays DRAFT_PASS_S of launch overhead. Verify is the target's own step over
k+1 tokens per sequence: cheap while decode is memory-bound (small batches), about k+1 times the
compute once it is compute-bound, so the gain falls with batch size and turns into a loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.common.errors import EngineStartError
from tuner.trial.outcome import TrialOutcome

# (tau, at k): mean tokens per verify step on real text, greedy. Sources in docs/sim.md ("Levers").
DEFAULT_ACCEPTANCE: dict[str, tuple[float, int]] = {
    "ngram": (1.5, 3),  # prompt lookup: gains on copy-heavy text only (vLLM docs: "modest speedups")
    "eagle3": (2.9, 3),  # EAGLE-3 chain drafts on chat (MT-Bench-like) at k=3
    "mtp": (1.85, 1),  # DeepSeek-V3 report: second-token acceptance 85-90%
    "dflash": (5.0, 15),  # DFlash on Qwen3 targets, block 16: ~6-8 on math/code, lower on chat
}
DEFAULT_DRAFT_LAYERS = {"ngram": 0, "eagle3": 1, "mtp": 1, "dflash": 5}
DRAFT_VOCAB_EAGLE3 = 32000  # EAGLE-3 heads predict over a reduced draft vocabulary
DRAFT_NGRAM_S = 5e-6  # per sequence per step, CPU (uncalibrated)
DRAFT_PASS_S = 40e-6  # per draft forward pass: graph launch and sync (uncalibrated)
AUTOREGRESSIVE = ("eagle3", "mtp")
_SGLANG = {"NGRAM": "ngram", "EAGLE": "eagle3", "EAGLE3": "eagle3", "NEXTN": "mtp", "DFLASH": "dflash"}


@dataclass(frozen=True, slots=True)
class SpecPlan:
    method: str  # ngram | eagle3 | mtp | dflash
    k: int  # draft tokens per verify step
    tau: float  # expected tokens per verify step (1 <= tau <= k + 1)
    draft_layers: int
    passes: int  # draft forward passes per verify step

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
    else:
        algo = cfg.get("speculative_algorithm")
        if not algo:
            return None
        method = _SGLANG.get(str(algo).upper(), "")
        steps = cfg.get("speculative_num_steps") or 3
        draft = cfg.get("speculative_num_draft_tokens") or (16 if method == "dflash" else steps + 1)
        k = int(draft) - 1
        passes_hint = int(steps)
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
    passes = 0 if method == "ngram" else (passes_hint or k) if method in AUTOREGRESSIVE else 1
    return SpecPlan(method, k, expected_tokens(a, k), layers, passes)
