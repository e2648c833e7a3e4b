"""Learning from failures: a known-OOM config (and anything larger in memory) is not launched again."""

from __future__ import annotations

from typing import Any

from tests.search.helpers import SMALL_LEVERS, core_for, make_study, synthetic
from tuner.search.ask_tell import TrialReport
from tuner.search.feasibility import FeasibilityModel
from tuner.search.space import build_space
from tuner.trial.outcome import TrialOutcome


def _params(mns: int, gmu: float, mbt: int = 8192) -> dict[str, Any]:
    return {"vllm.max_num_seqs": mns, "vllm.max_num_batched_tokens": mbt, "vllm.gpu_memory_utilization": gmu,
            "vllm.block_size": 16, "vllm.enable_chunked_prefill": True, "vllm.max_num_partial_prefills": 1,
            "vllm.scheduling_policy": "fcfs", "vllm.max_cudagraph_capture_size": 1024}


def test_known_oom_config_is_not_relaunched_nor_anything_larger() -> None:
    core, _ = core_for(make_study(search={"algorithm": "random", "baseline_first": False}))
    core.optuna.enqueue_trial(_params(512, 0.95))
    first = core.ask()
    assert first is not None and first.args["max_num_seqs"] == 512
    core.tell(first.number, TrialReport.failed(TrialOutcome.OOM, "CUDA out of memory"))

    core.optuna.enqueue_trial(_params(512, 0.95))  # the very same config
    core.optuna.enqueue_trial(_params(800, 0.96, 16384))  # larger on every memory knob
    core.optuna.enqueue_trial(_params(256, 0.95))  # smaller on one: may run
    nxt = core.ask()
    assert nxt is not None
    assert (nxt.args["max_num_seqs"], nxt.args["gpu_memory_utilization"]) == (256, 0.95)
    reasons = [r["reason"] for r in core.rejected]
    assert len(reasons) == 2
    assert "predicted OOM" in reasons[0] or "failed before" in reasons[0]
    assert "predicted OOM" in reasons[1] and "trial 0" in reasons[1]
    assert core.rejected[1]["params"]["max_num_seqs"] == 800


def test_rule_is_dropped_when_a_larger_config_runs() -> None:
    space = build_space(make_study())
    model = FeasibilityModel(space.engines, use_classifier=False)
    big = {"max_num_seqs": 512, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.95}
    model.observe("vllm", big, TrialOutcome.OOM, 3)
    bigger = {**big, "max_num_seqs": 600}
    assert model.predict("vllm", bigger) is not None
    model.observe("vllm", {**bigger, "max_num_seqs": 1000}, TrialOutcome.OK, 4)  # ran fine: the rule was wrong
    assert model.predict("vllm", bigger) is None
    assert model.predict("vllm", big) is not None  # the exact failure is still remembered


def test_a_run_with_smaller_cuda_graphs_keeps_the_rule_of_larger_ones() -> None:
    """An OOM at the 2048-token capture size is not contradicted by the same config running with 512: graphs
    need memory of their own, so the rule still covers larger graphs (it did not before they were a memory knob)."""
    space = build_space(make_study())
    model = FeasibilityModel(space.engines, use_classifier=False)
    big = {"max_num_seqs": 256, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.97,
           "max_cudagraph_capture_size": 2048}
    model.observe("vllm", big, TrialOutcome.OOM, 3)
    model.observe("vllm", {**big, "max_cudagraph_capture_size": 512}, TrialOutcome.OK, 4)
    why = model.predict("vllm", {**big, "max_num_seqs": 300})
    assert why is not None and "max_cudagraph_capture_size >= 2048" in why
    assert model.predict("vllm", {**big, "max_num_seqs": 300, "max_cudagraph_capture_size": 1024}) is None


def test_crashes_and_timeouts_teach_nothing_about_the_config() -> None:
    space = build_space(make_study())
    model = FeasibilityModel(space.engines)
    cfg = {"max_num_seqs": 512, "gpu_memory_utilization": 0.95}
    model.observe("vllm", cfg, TrialOutcome.CRASHED, 1)
    model.observe("vllm", cfg, TrialOutcome.TIMEOUT, 2)
    assert model.predict("vllm", cfg) is None


def _oom_launches(learn: bool, seed: int) -> int:
    # the space the synthetic surface was written for (the smaller levers add dimensions it ignores)
    study = make_study(seed=seed, search={"algorithm": "random", "baseline_first": False, "learn_failures": learn},
                       search_space={"exclude": SMALL_LEVERS})
    core, space = core_for(study)
    ooms = 0
    for _ in range(40):
        cfg = core.ask()
        assert cfg is not None
        res = synthetic(space, cfg)
        ooms += res.outcome is TrialOutcome.OOM
        core.tell(cfg.number, res)
    return ooms


def test_learning_failures_launches_fewer_ooms() -> None:
    learned = sum(_oom_launches(True, s) for s in range(3))
    blind = sum(_oom_launches(False, s) for s in range(3))
    assert blind >= 6, "the synthetic space must have an OOM region the random sampler hits"
    assert learned < blind * 0.75, (learned, blind)


def test_classifier_predicts_a_failure_region_after_a_few_examples() -> None:
    space = build_space(make_study())
    model = FeasibilityModel(space.engines, use_classifier=True, min_failures=2)
    for i, (mns, gmu) in enumerate([(300, 0.95), (700, 0.97), (900, 0.96), (400, 0.96)]):
        model.observe("vllm", {"max_num_seqs": mns, "gpu_memory_utilization": gmu, "max_num_batched_tokens": 2048 * (i + 1)},
                      TrialOutcome.OOM, i)
    for i, (mns, gmu) in enumerate([(32, 0.85), (64, 0.9), (128, 0.82), (200, 0.88), (50, 0.93)]):
        model.observe("vllm", {"max_num_seqs": mns, "gpu_memory_utilization": gmu}, TrialOutcome.OK, 10 + i)
    why = model.predict("vllm", {"max_num_seqs": 500, "gpu_memory_utilization": 0.96, "max_num_batched_tokens": 1024})
    assert why is not None and "classifier" in why
    assert model.predict("vllm", {"max_num_seqs": 40, "gpu_memory_utilization": 0.86}) is None


def test_the_classifier_reads_the_speculative_config_the_args_carry_as_one_dict() -> None:
    """vLLM's `--speculative-config` is one JSON arg; the classifier reads params by their sampled names
    (`speculative_config.method`). Before the fix every config read as speculation off: DFlash OOMs at a size
    where plain decoding runs were then one region with those runs, and the DFlash config was let through."""
    from tests.search.test_levers import DFLASH, study

    st = study(allow=["speculative_decoding"], speculative=DFLASH)
    sp = build_space(st).engines["sim"]

    def args(method: str, seqs: int, mem: float = 0.95) -> dict[str, Any]:
        values = {"max_num_seqs": seqs, "gpu_memory_utilization": mem, "speculative_config.method": method,
                  "speculative_config.num_speculative_tokens": 8}
        return sp.apply_constraints(values)[0]

    model = FeasibilityModel({"sim": sp}, use_classifier=True, min_failures=2, threshold=0.7)
    assert model.full("sim", args("dflash", 256))["speculative_config.method"] == "dflash"
    for i, seqs in enumerate([300, 420, 512, 640]):
        model.observe("sim", args("dflash", seqs), TrialOutcome.OOM, i)
        model.observe("sim", args("none", seqs + 10), TrialOutcome.OK, 10 + i)
    for i, seqs in enumerate([16, 32, 64]):
        model.observe("sim", args("dflash", seqs), TrialOutcome.OK, 20 + i)
    # a smaller memory share: no OOM rule covers it (each needs >= 0.95), only the classifier can say it
    why = model.predict("sim", args("dflash", 470, mem=0.9))
    assert why is not None and "classifier" in why, why
    assert model.predict("sim", args("none", 470, mem=0.9)) is None


def _mem(mns: int, mbt: int, gmu: float, graphs: int) -> dict[str, Any]:
    return {"max_num_seqs": mns, "max_num_batched_tokens": mbt, "gpu_memory_utilization": gmu,
            "max_cudagraph_capture_size": graphs}


def test_two_ooms_predict_every_config_above_a_mix_of_their_memory_settings() -> None:
    """Traced on the search benchmark (dynamic, seed 551): draws at memory share 0.97 ran out of memory seven times
    in one search, each below some other failure on one knob, so no single-failure rule covered the next. Memory
    demands add up, so a config at least as large as a mix of two failures' settings fails too."""
    space = build_space(make_study())
    model = FeasibilityModel(space.engines, use_classifier=False)
    model.observe("vllm", _mem(43, 16384, 0.97, 1550), TrialOutcome.OOM, 7)
    model.observe("vllm", _mem(293, 4494, 0.97, 1648), TrialOutcome.OOM, 9)
    between = _mem(256, 8192, 0.97, 2048)  # below trial 7 in max_num_batched_tokens, below 9 in max_num_seqs
    why = model.predict("vllm", between)
    assert why is not None and "trials 7 and 9" in why, why
    assert model.predict("vllm", {**between, "gpu_memory_utilization": 0.92}) is None  # below both
    assert model.predict("vllm", {**between, "max_num_seqs": 30}) is None  # below both failures' sequence caps
    assert model.predict("vllm", {**between, "max_cudagraph_capture_size": 1500}) is None

    model.observe("vllm", _mem(250, 12000, 0.97, 1648), TrialOutcome.OK, 12)  # a mix that ran: the pair is wrong
    assert model.predict("vllm", between) is None
    assert model.predict("vllm", _mem(300, 5000, 0.97, 1700)) is not None  # trial 9's own rule still holds


def test_a_larger_draft_is_a_larger_config_not_another_context() -> None:
    """An OOM with DFlash at 2 draft tokens predicts it at 8 with every other knob the same (more draft tokens only
    need more memory), not at 1 and not for another method."""
    from tests.search.test_levers import DFLASH, study

    st = study(allow=["speculative_decoding"], speculative=DFLASH)
    sp = build_space(st).engines["sim"]

    def args(method: str, k: int) -> dict[str, Any]:
        values = {"max_num_seqs": 256, "gpu_memory_utilization": 0.95, "speculative_config.method": method,
                  "speculative_config.num_speculative_tokens": k}
        return sp.apply_constraints(values)[0]

    model = FeasibilityModel({"sim": sp}, use_classifier=False)
    model.observe("sim", args("dflash", 2), TrialOutcome.OOM, 3)
    why = model.predict("sim", args("dflash", 8))
    assert why is not None and "speculative_config.num_speculative_tokens >= 2" in why, why
    assert model.predict("sim", args("dflash", 1)) is None
    assert model.predict("sim", args("ngram", 8)) is None


def test_the_memory_model_learns_a_half_space_no_rule_covers() -> None:
    """Memory demand is a sum, so OOM is a half-space in the sizes (here: memory share + 2e-5 x graph size > 0.99,
    the sequence cap irrelevant). Failures at many sequence caps do not cover a config with a smaller cap, by rule;
    the logistic memory model, fitted on OOM against ran, predicts it from the share and the graphs."""
    space = build_space(make_study())
    model = FeasibilityModel(space.engines, use_classifier=False)
    runs = [(43, 0.97, 1550), (293, 0.97, 1648), (626, 0.97, 1699), (78, 0.96, 1716), (177, 0.95, 1961),
            (1024, 0.89, 1816), (256, 0.86, 2367), (16, 0.88, 682), (256, 0.91, 660), (128, 0.94, 2100),
            (512, 0.93, 1556), (64, 0.92, 2043)]
    for i, (mns, gmu, graphs) in enumerate(runs):
        oom = gmu + 2e-5 * graphs > 0.99
        model.observe("vllm", _mem(mns, 8192, gmu, graphs), TrialOutcome.OOM if oom else TrialOutcome.OK, i)
    hot = _mem(16, 8192, 0.97, 1800)
    assert not any(r.covers("vllm", model.full("vllm", hot)) for r in model.rules)
    why = model.predict("vllm", hot)
    assert why is not None and "memory model predicts OOM" in why, why
    assert model.predict("vllm", _mem(16, 8192, 0.88, 700)) is None
    assert model.predict("vllm", _mem(2048, 8192, 0.9, 512)) is None  # a large cap alone is not the cause
