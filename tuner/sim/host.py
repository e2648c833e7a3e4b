"""The user's host, measured: two factors on the simulator's CPU-side step terms, fitted on one low-rate real run.

Why: the engine core's CPU work around a step differs between hosts of one GPU kind far more than its GPU work does.
vLLM's launch of a step that carries prompt tokens (its kernels issued from Python, no CUDA graph) took 19-35 ms on
four H100 hosts and ~0.4 x the calibrated value on a fifth (benchmarks/results/gpu-confirm), while decode steps and
throughput carried over within a few percent. That launch sets the P99 ITL and much of the TTFT of small models, so
one calibration per GPU kind cannot predict a user's tail latencies: on that fifth host the shipped simulator read
P99 ITL 44-156 % high on 1.7B, 4B and 8B. A short real run on the user's own machine pins it: fitted on the lowest-rate run of each
server, the factors cut the median P99 ITL error of that server's other runs from 86.5 % to 3.3 % and P50 TPOT from
6.5 % to 1.7 % (benchmarks/sim_host_probe.py --confirm, six H100 servers).

Factors (vLLM flavour): `launch` scales the prompt step's launch (`prompt_cpu_step_s`, `prompt_cpu_layer_s`), `step`
the fixed time of every step (`o_step_s`, `w_floor_layer_s`). Fitted on a grid by the sum over the run's pooled
inter-token intervals' 10/25/50/75/90/95/98/99/99.5th percentiles of |log(simulated / measured)|, the simulator fed
the run's own send times and lengths. Use the result in a study as `sim: {host_factors: {launch: L, step: S}}`.

    python -m tuner.sim.host --bench RESULT.json --shape qwen3-8b --gpu H100 [--args '{"max_num_seqs": 128}']

RESULT.json: a `vllm bench serve --save-detailed` result of one low-rate run (a few req/s, 100+ prompts) on the
engine defaults or the given args; the printed `sim:` block goes into the study file.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import BenchRun

QUANTILES = (10, 25, 50, 75, 90, 95, 98, 99, 99.5)
LAUNCH_GRID = tuple(round(0.2 + 0.05 * i, 2) for i in range(27))  # 0.2 .. 1.5
# 0.7 .. 1.6: every Qwen3-14B server on two H100 hosts fitted the old top, 1.3 (1.4-1.45 on this grid; the runs
# after their probes: P99 TTFT 12.6 -> 8.6 %, P50 TPOT 3.0 -> 1.9 %, P99 ITL 2.4 -> 3.5 %; docs/sim.md)
STEP_GRID = tuple(round(0.7 + 0.05 * i, 2) for i in range(19))
MAX_OFF = 0.25  # a fit further off than this on average: the factors do not model the engine (HostFit.trusted)
RULE_STEP_GRID = STEP_GRID[:13]  # 0.7 .. 1.3, the grid the checks' rules fixed (sim_host_probe.py, sim_fresh.py)


def apply_host(cal: Calibration, launch: float = 1.0, step: float = 1.0) -> Calibration:
    """The calibration on a host whose prompt-step launch takes `launch` x and whose fixed step time `step` x the
    calibrated ones."""
    if launch == 1.0 and step == 1.0:
        return cal
    return dataclasses.replace(cal, prompt_cpu_step_s=cal.prompt_cpu_step_s * launch,
                               prompt_cpu_layer_s=cal.prompt_cpu_layer_s * launch, o_step_s=cal.o_step_s * step,
                               w_floor_layer_s=cal.w_floor_layer_s * step)


def host_calibration(host: Any) -> Calibration | None:
    """FITTED on the study's host (`sim.host_factors`: an object with `launch` and `step`), or None (FITTED) without one."""
    return None if host is None else apply_host(FITTED, float(host.launch), float(host.step))


@dataclass(frozen=True)
class HostFit:
    launch: float
    step: float
    loss: float  # the fitted factors' percentile loss on the run
    loss_calibrated: float  # the same loss with both factors 1 (the calibration as shipped)
    requests: int

    @property
    def off(self) -> float:
        """How far the fitted simulator's ITL percentiles stay from the run's, on average (0.05 = 5 %)."""
        return math.exp(self.loss / len(QUANTILES)) - 1

    @property
    def off_calibrated(self) -> float:
        """The same for the calibration as shipped (both factors 1)."""
        return math.exp(self.loss_calibrated / len(QUANTILES)) - 1

    @property
    def trusted(self) -> bool:
        """Whether the two factors model this engine: the 22 probes of eleven H100 servers fitted to 2-10 %."""
        return self.off <= MAX_OFF


def itl_loss(itl_s: np.ndarray, measured_q: np.ndarray) -> float:
    return float(np.sum(np.abs(np.log(np.percentile(itl_s, QUANTILES) / measured_q))))


def fit_host(data: dict[str, Any], shape: str, gpu: str, args: dict[str, Any] | None = None,
             max_model_len: int = 40960, base: Calibration | None = None,
             launch_grid: Sequence[float] = LAUNCH_GRID, step_grid: Sequence[float] = STEP_GRID) -> HostFit:
    """The host factors that make the simulator's inter-token intervals of a measured run (a `--save-detailed`
    result's dict) match the run's; raises ValueError when the run has no per-request data."""
    from tuner.sim.detailed import bench_run, has_detail

    if not has_detail(data):
        raise ValueError("the result has no per-request data (ttfts, itls): run `vllm bench serve` with "
                         "--save-detailed")
    return fit_host_run(bench_run(data), shape, gpu, args, max_model_len, base, launch_grid, step_grid)


def fit_host_run(run: BenchRun, shape: str, gpu: str, args: dict[str, Any] | None = None,
                 max_model_len: int = 40960, base: Calibration | None = None,
                 launch_grid: Sequence[float] = LAUNCH_GRID, step_grid: Sequence[float] = STEP_GRID) -> HostFit:
    """fit_host on a run's per-request arrays (tuner.sim.detailed.BenchRun: from a bench result or from servetune's
    own records, tuner.sim.detailed.records_run); raises ValueError when they cannot pin the factors."""
    from tuner.sim.detailed import bench_requests
    from tuner.sim.engine import SimulatedEngine

    if run.start_times is None:
        raise ValueError("the result has no start_times (per-request send times): use a vllm bench that writes them")
    real = np.concatenate([np.asarray(x, dtype=float) for x in run.itls if len(x)] or [np.zeros(0)])
    if len(real) < 100:
        raise ValueError(f"only {len(real)} inter-token intervals: use a run of 100+ prompts with 100+ output tokens")
    measured_q = np.percentile(real, QUANTILES)
    if not np.all(measured_q > 0):
        raise ValueError("the run's inter-token intervals include zeros at the 10th percentile: not a streamed run")
    reqs = bench_requests(run, np.zeros(len(run)))
    cal0 = base or FITTED

    def score(key: tuple[float, float]) -> float:
        eng = SimulatedEngine(flavour="vllm", gpu=gpu, shape=shape, args=args or {}, max_model_len=max_model_len,
                              calibration=apply_host(cal0, *key))
        recs = eng.run(reqs)
        itl = np.concatenate([np.diff(np.asarray(r.token_times)) for r in recs if len(r.token_times) > 1])
        return itl_loss(itl, measured_q)

    losses = {key: score(key) for key in itertools.product(launch_grid, step_grid)}
    best = min(losses, key=lambda k: losses[k])
    shipped = losses[(1.0, 1.0)] if (1.0, 1.0) in losses else score((1.0, 1.0))  # on the grid unless it was narrowed
    return HostFit(best[0], best[1], losses[best], shipped, len(run))


def load_run(bench: Path | None, records: Path | None) -> BenchRun:
    """The probe run's per-request arrays from a bench result or from servetune's records; ValueError says why not."""
    from tuner.sim.detailed import bench_run, has_detail, load_json, records_run

    path = bench if bench is not None else records
    assert path is not None
    if not path.is_file():
        what = "a `vllm bench serve --save-detailed` result" if bench is not None else "a records.parquet"
        raise ValueError(f"no such file | fix: the path of {what}")
    if records is not None:
        from tuner.load.records_io import read_records, to_records

        try:
            return records_run(to_records(read_records(records)))
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds on a file that is not ours
            raise ValueError(f"not a servetune records file ({type(exc).__name__}: {exc})") from None
    try:
        data = load_json(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"not a JSON result ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a `vllm bench serve` result (a JSON object)")
    if not has_detail(data):
        raise ValueError("the result has no per-request data (ttfts, itls): run `vllm bench serve` with "
                         "--save-detailed")
    return bench_run(data)


def main(argv: Sequence[str] | None = None) -> int:
    from tuner.common.errors import SpecError
    from tuner.common.prog import prog
    from tuner.sim.catalog import get_gpu, get_shape
    from tuner.spec.levers import labels

    ap = argparse.ArgumentParser(prog=prog("host"), description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--bench", type=Path, help="a `vllm bench serve --save-detailed` result (JSON)")
    src.add_argument("--records", type=Path, help="servetune's own per-request records of one load run "
                     "(`servetune bench --rate R --output DIR` writes DIR/records.parquet)")
    ap.add_argument("--shape", required=True, help="the simulator's model shape, e.g. qwen3-8b")
    ap.add_argument("--gpu", required=True, help="the GPU the run was measured on, e.g. H100")
    ap.add_argument("--args", default="{}", help="the engine arguments of the run (JSON object, snake_case)")
    ap.add_argument("--max-model-len", type=int, default=40960)
    a = ap.parse_args(argv)

    def fail(msg: str) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return 2

    try:
        get_shape(a.shape)
        get_gpu(a.gpu)
    except SpecError as exc:
        return fail(str(exc))
    try:
        args = json.loads(a.args)
    except json.JSONDecodeError as exc:
        return fail(f"--args is not JSON ({exc}) | fix: e.g. --args '{{\"max_num_seqs\": 128}}'")
    if not isinstance(args, dict):
        return fail("--args must be a JSON object | fix: e.g. --args '{\"max_num_seqs\": 128}'")
    if "speculative_decoding" in labels(args):  # as the simulator gate decides (tuner/search/study_gate.py)
        return fail("--args: a run with speculative decoding cannot probe the host: its step times carry the text's "
                    "acceptance and a verify-step cost the simulator does not calibrate (docs/sim.md) | fix: measure "
                    "the probe run without speculative_config")
    where = f"--bench {a.bench}" if a.bench is not None else f"--records {a.records}"
    try:
        run = load_run(a.bench, a.records)
        fit = fit_host_run(run, a.shape, a.gpu, args, a.max_model_len)
    except ValueError as exc:
        return fail(f"{where}: {exc}")
    print(f"# {fit.requests} requests; ITL percentile loss {fit.loss:.3f} (calibrated as shipped: "
          f"{fit.loss_calibrated:.3f})")
    if not fit.trusted:
        print(f"warning: at its best the simulator's ITL percentiles are still {fit.off:.0%} off this run's on average "
              f"(real probes: 2-10 %): check --shape, --gpu and --args; the factors below do not model this engine",
              file=sys.stderr)
    print(f"sim:\n  gpu: {a.gpu}\n  host_factors: {{launch: {fit.launch:g}, step: {fit.step:g}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
