"""SimulatedEngine: start-time checks like the real engine, then a workload run in virtual time."""

from __future__ import annotations

import gc
import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.common.errors import EngineStartError
from tuner.load.records import Request, RequestRecord
from tuner.sim.calibration import FITTED
from tuner.sim.catalog import get_gpu, get_shape
from tuner.sim.core import DONE, Core, Seq
from tuner.sim.cost import Calibration, StepCost
from tuner.sim.knobs import resolve_args
from tuner.sim.memory import dtype_bytes, plan_sglang, plan_vllm
from tuner.sim.sglang_sched import SGLangScheduler
from tuner.sim.vllm_sched import VLLMScheduler

TOO_LONG = "prompt too long (HTTP 400)"


def sglang_max_running(kv_tokens: int, max_model_len: int) -> int:
    """SGLang sizes its request pool from the KV pool: clamp(tokens / context_len * 512, 2048, 4096)."""
    return min(max(int(kv_tokens / max_model_len * 512), 2048), 4096)


class SimulatedEngine:
    """A calibrated model of one vLLM or SGLang server on one GPU type (times tensor parallelism)."""

    def __init__(self, *, flavour: str, gpu: str, shape: str, args: Mapping[str, Any], max_model_len: int,
                 tensor_parallel_size: int = 1, dtype: str = "bfloat16",
                 calibration: Calibration | None = None) -> None:
        self.flavour = flavour
        self.shape = get_shape(shape)
        self.gpu = get_gpu(gpu)
        self.max_model_len = max_model_len
        self.tp = tensor_parallel_size
        self.cal = calibration or FITTED
        cfg = resolve_args(flavour, gpu, shape, max_model_len, args)
        nbytes = dtype_bytes(dtype)
        if flavour == "vllm":
            plan = plan_vllm(self.shape, self.gpu, cfg, max_model_len, self.tp, dtype)
            eager = cfg["enforce_eager"]
        else:
            plan = plan_sglang(self.shape, self.gpu, cfg, max_model_len, self.tp, dtype)
            if cfg["max_running_requests"] is None:
                cfg["max_running_requests"] = sglang_max_running(plan.kv_tokens, max_model_len)
            if cfg["max_running_requests"] < 1:
                raise EngineStartError("start_failed", "ValueError: max_running_requests must be positive")
            eager = False
        self.cfg = cfg
        self.plan = plan
        self.macro_steps = True  # False: step by step (for checking the closed-form decode runs)
        self.kv_capacity_tokens: int = plan.kv_tokens
        self.cost = StepCost(self.shape, self.gpu, self.cal, self.tp, nbytes, eager)
        block = cfg["block_size"] if flavour == "vllm" else cfg["page_size"]
        self.resolved: dict[str, Any] = {
            "engine": "sim",
            "flavour": flavour,
            "gpu": self.gpu.name,
            "shape": self.shape.name,
            "model_hf_id": self.shape.hf_id,
            "max_model_len": max_model_len,
            "tensor_parallel_size": self.tp,
            "dtype": dtype,
            **cfg,
            "kv_capacity_tokens": plan.kv_tokens,
            "num_gpu_blocks": plan.kv_tokens // block,
            "weights_gib": round(plan.weights_gib, 3),
            "activation_gib": round(plan.activation_gib, 3),
            "cuda_graph_gib": round(plan.cuda_graph_gib, 3),
            "kv_cache_gib": round(plan.kv_gib, 3),
        }

    def new_scheduler(self) -> Core:
        """A fresh engine state (empty KV cache, no requests)."""
        sched: Core
        if self.flavour == "vllm":
            sched = VLLMScheduler(self.cost, self.cfg, self.kv_capacity_tokens, self.cal.frontend_s)
            sched.heat_k, sched.heat_tau = self.cal.heat_slowdown, self.cal.heat_tau_s
        else:
            sched = SGLangScheduler(self.cost, self.cfg, self.kv_capacity_tokens, self.cal.frontend_s)
        sched.macro = self.macro_steps
        return sched

    def too_long(self, input_len: int, output_len: int) -> bool:
        return input_len + output_len > self.max_model_len or input_len < 1

    def run(self, requests: Sequence[Request], *, concurrency: int | None = None,
            max_sim_time_s: float | None = None) -> list[RequestRecord]:
        """Serve the requests in virtual time; open loop by arrival_s, or closed loop with `concurrency`."""
        # a run makes no reference cycles, only many small objects: the cycle collector would only walk
        # them (about 10 % of a run's CPU time); refcounting still frees everything
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(requests, concurrency, max_sim_time_s)
        finally:
            if enabled:
                gc.enable()

    def _run(self, requests: Sequence[Request], concurrency: int | None,
             max_sim_time_s: float | None) -> list[RequestRecord]:
        sched = self.new_scheduler()
        n = len(requests)
        seqs = [Seq(i, r.input_len, r.output_len, r.arrival_s, r.prefix_group, r.prefix_len)
                for i, r in enumerate(requests)]
        sent = [False] * n
        errors: dict[int, str] = {}
        t_stop = math.inf if max_sim_time_s is None else float(max_sim_time_s)
        closed = concurrency is not None
        backlog: deque[int] = deque()
        pending: list[tuple[float, int]] = []  # (send time, request index), a heap
        if closed:
            if concurrency < 1:
                raise ValueError(f"concurrency must be >= 1, got {concurrency}")
            backlog.extend(range(n))
            for _ in range(min(concurrency, n)):
                pending.append((0.0, backlog.popleft()))
        else:
            pending = [(s.arrival, i) for i, s in enumerate(seqs)]
            heapq.heapify(pending)
        waiting = sched.waiting
        running = sched.running
        # the API server streams every running sequence's tokens before it reads, tokenizes and hands on a
        # new prompt: the engine sees a request per_seq x (sequences running) after it was sent
        per_seq = self.cal.ingress_per_seq_s
        finished = sched.finished
        advance = sched.advance
        heappop, heappush = heapq.heappop, heapq.heappush
        mml = self.max_model_len
        inf = math.inf
        while True:
            now = sched.now
            next_arr = inf
            while pending:
                t_send, i = pending[0]
                s = seqs[i]
                bad = s.inp + s.out > mml or s.inp < 1  # self.too_long: answered at once
                t_in = t_send + per_seq * len(running) if per_seq and not bad else t_send
                if t_in > now:
                    next_arr = t_in
                    break
                heappop(pending)
                s.arrival = t_send
                sent[i] = True
                if bad:
                    errors[i] = TOO_LONG
                    if backlog:  # the client hears the 400 at once and sends its next request
                        heappush(pending, (t_send, backlog.popleft()))
                else:
                    waiting.append(s)
            if now >= t_stop:
                break
            progressed = advance(next_arr if next_arr < t_stop else t_stop)
            if finished:
                if backlog:
                    for s in finished:
                        if backlog:  # closed loop: the next request goes out when this one's last token arrives
                            heappush(pending, (s.done, backlog.popleft()))  # type: ignore[arg-type]
                finished.clear()
            if not progressed:
                if next_arr < t_stop:
                    sched.now = max(sched.now, next_arr)
                    continue
                break
        record = self._record
        return [record(sched, requests[i], seqs[i], sent[i], errors.get(i), t_stop) for i in range(n)]

    def _record(self, sched: Core, r: Request, s: Seq, sent: bool, error: str | None,
                t_stop: float) -> RequestRecord:
        sent_s = s.arrival if sent else min(s.arrival, t_stop)
        if error is not None:
            return RequestRecord(r.id, r.cls, r.input_len, r.output_len, sent_s, error=error,
                                 preemptions=s.preempt, warmup=r.warmup)
        if s.state == DONE:
            return RequestRecord(r.id, r.cls, r.input_len, r.output_len, sent_s, s.first, s.done,
                                 sched.token_times(s), s.out, None, s.preempt, r.warmup)
        return RequestRecord(r.id, r.cls, r.input_len, r.output_len, sent_s, s.first, None, sched.token_times(s),
                             sched.generated(s), "timeout", s.preempt, r.warmup)
