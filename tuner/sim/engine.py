"""SimulatedEngine: start-time checks like the real engine, then a workload run in virtual time."""

from __future__ import annotations

import gc
import math
import random
from bisect import insort
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from tuner.common.errors import EngineStartError
from tuner.load.records import Request, RequestRecord
from tuner.sim.api_server import api_queue, api_rounds, stream_late
from tuner.sim.calibration import FITTED, sglang_terms_for
from tuner.sim.catalog import get_gpu, get_shape
from tuner.sim.core import DONE, Core, Seq
from tuner.sim.cost import Calibration, StepCost
from tuner.sim.knobs import resolve_args
from tuner.sim.memory import dtype_bytes, plan_sglang, plan_vllm
from tuner.sim.sglang_cost import SGLangTerms, sglang_calibration
from tuner.sim.sglang_sched import SGLangScheduler
from tuner.sim.spec import plan as spec_plan
from tuner.sim.vllm_sched import VLLMScheduler
from tuner.trial.outcome import TrialOutcome

TOO_LONG = "prompt too long (HTTP 400)"


def sglang_max_running(kv_tokens: int, max_model_len: int) -> int:
    """SGLang sizes its request pool from the KV pool: clamp(tokens / context_len * 512, 2048, 4096)."""
    return min(max(int(kv_tokens / max_model_len * 512), 2048), 4096)


class SimulatedEngine:
    """A calibrated model of one vLLM or SGLang server on one GPU type (times tensor parallelism)."""

    def __init__(self, *, flavour: str, gpu: str, shape: str, args: Mapping[str, Any], max_model_len: int,
                 tensor_parallel_size: int = 1, dtype: str = "bfloat16",
                 calibration: Calibration | None = None,
                 speculative: Mapping[str, Mapping[str, Any]] | None = None,
                 sglang_terms: SGLangTerms | Literal["card"] | None = "card") -> None:
        """`speculative`: the study's figures per method (acceptance_length, at_tokens, draft_layers);
        `sglang_terms`: SGLang's own step-cost terms over the calibration ("card": those fitted for this GPU,
        tuner.sim.calibration.sglang_terms_for; None: the calibration alone)."""
        self._init_kw: dict[str, Any] = dict(flavour=flavour, gpu=gpu, shape=shape, args=dict(args),
                                             max_model_len=max_model_len, tensor_parallel_size=tensor_parallel_size,
                                             dtype=dtype, calibration=calibration, speculative=speculative,
                                             sglang_terms=sglang_terms)
        self.flavour = flavour
        self.shape = get_shape(shape)
        self.gpu = get_gpu(gpu)
        if isinstance(sglang_terms, str):
            if sglang_terms != "card":
                raise ValueError(f"sglang_terms: expected SGLangTerms, None or 'card', got {sglang_terms!r}")
            sglang_terms = sglang_terms_for(self.gpu.name)
        self.max_model_len = max_model_len
        self.cal = calibration or FITTED
        cfg = resolve_args(flavour, gpu, shape, max_model_len, args)
        # layout: TP and DP from the args when given (vLLM / SGLang names), else the study's TP
        self.tp = cfg.get("tensor_parallel_size") or cfg.get("tp_size") or tensor_parallel_size
        self.dp = cfg.get("data_parallel_size") or cfg.get("dp_size") or 1
        nbytes = dtype_bytes(dtype)
        fp8_w = cfg.get("quantization") == "fp8"
        fp8_kv = "fp8" in str(cfg.get("kv_cache_dtype") or "")
        methods = {k: dict(v) for k, v in (speculative or {}).items()}
        self.spec = spec_plan(flavour, cfg, methods)
        draft_layers = self.spec.draft_layers if self.spec else 0
        prec: dict[str, Any] = {"fp8_weights": fp8_w, "fp8_kv": fp8_kv, "draft_layers": draft_layers}
        # SGLang's overlap scheduler admits a request one step later, as vLLM's async scheduling does
        self.sglang_overlap = flavour != "vllm" and sglang_terms is not None and bool(sglang_terms.overlap)
        if flavour != "vllm":
            self.cal = sglang_calibration(self.cal, sglang_terms, cfg.get("attention_backend"))
        elif self.cal.kv_seq_s or self.cal.dec_step_extra_s:  # SGLang's decode paths (Core) carry them, vLLM's not
            raise ValueError("Calibration.kv_seq_s and dec_step_extra_s are SGLang's triton decode terms; a vLLM "
                             "engine needs them 0 (set SGLangTerms.triton_kv_seq_s / triton_decode_s instead)")
        if flavour == "vllm":
            plan = plan_vllm(self.shape, self.gpu, cfg, max_model_len, self.tp, dtype, **prec)
            eager = cfg["enforce_eager"]
            graph_max = 0 if eager else cfg["max_cudagraph_capture_size"]
        else:
            plan = plan_sglang(self.shape, self.gpu, cfg, max_model_len, self.tp, dtype, **prec)
            graph_max = 0 if cfg["disable_cuda_graph"] else cfg["cuda_graph_max_bs"]
            if cfg["max_running_requests"] is None:
                cfg["max_running_requests"] = sglang_max_running(plan.kv_tokens, max_model_len)
            if cfg["max_running_requests"] < 1:
                raise EngineStartError(TrialOutcome.START_FAILED, "ValueError: max_running_requests must be positive")
            eager = False
        self.cfg = cfg
        self.plan = plan
        self.macro_steps = True  # False: step by step (for checking the closed-form decode runs)
        self.kv_capacity_tokens: int = plan.kv_tokens
        self.cost = StepCost(self.shape, self.gpu, self.cal, self.tp, nbytes, eager, fp8_weights=fp8_w,
                             fp8_kv=fp8_kv, spec=self.spec, graph_max=graph_max, methods=methods)
        block = cfg["block_size"] if flavour == "vllm" else cfg["page_size"]
        self.resolved: dict[str, Any] = {
            "engine": "sim",
            "flavour": flavour,
            "gpu": self.gpu.name,
            "shape": self.shape.name,
            "model_hf_id": self.shape.hf_id,
            "max_model_len": max_model_len,
            "dtype": dtype,
            **cfg,
            "tensor_parallel_size": self.tp,
            "data_parallel_size": self.dp,
            "gpus": self.tp * self.dp,
            "spec_tokens_per_step": round(self.spec.tau, 3) if self.spec else 1.0,
            "kv_capacity_tokens": plan.kv_tokens,
            "num_gpu_blocks": plan.kv_tokens // block,
            "weights_gib": round(plan.weights_gib, 3),
            "activation_gib": round(plan.activation_gib, 3),
            "cuda_graph_gib": round(plan.cuda_graph_gib, 3),
            "kv_cache_gib": round(plan.kv_gib, 3),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its construction arguments (the compiled class, tuner/sim/native.py, has no __dict__)."""
        return (_rebuild, (self._init_kw, self.macro_steps))

    def new_scheduler(self) -> Core:
        """A fresh engine state (empty KV cache, no requests)."""
        sched: Core
        if self.flavour == "vllm":
            sched = VLLMScheduler(self.cost, self.cfg, self.kv_capacity_tokens, self.cal.frontend_s)
            sched.heat_k, sched.heat_tau = self.cal.heat_slowdown, self.cal.heat_tau_s
            sched.defer = self.cal.prompt_defer
            sched.lead_max = self.cal.prompt_lead_max_s or math.inf
            sched.lead_tok = self.cal.prompt_lead_tok_s
            sched.defer_max = self.cal.prompt_defer_max_s or math.inf
            sched.cpu_tok = self.cal.prompt_cpu_tok_s
            sched.cpu_step = self.cal.prompt_cpu_step_s + self.cal.prompt_cpu_layer_s * self.shape.layers
            sched.cpu_floor = bool(sched.cpu_tok or sched.cpu_step)
            sched.cpu_cv = self.cal.prompt_cpu_step_cv
            sched.launch = bool(self.cal.prompt_lead_cpu)
            sched.serial = self.cal.prompt_launch_serial
            sched.hold = bool(self.cal.prompt_hold)
            sched.after_launch = sched.hold and bool(self.cal.sched_after_launch)
            sched.peek = sched.after_launch and self.cal.sched_after_launch >= 2
            if sched.cpu_cv:  # (the floor's and the admission's fixed CPU time per prompt step)
                sched.rng = random.Random(self.cal.jitter_seed)
            sched.admit_cpu, sched.admit_step = self.cal.admit_cpu_s, self.cal.admit_step_s
            sched.admit_on = bool(self.cal.admit_cpu_s or self.cal.admit_step_s)
            if sched.hold:  # in place of the deferral, the lead, the floor and the admission terms (its launch is
                # drawn from prompt_cpu_step_s: VLLMScheduler._held)
                sched.defer, sched.launch, sched.cpu_floor, sched.admit_on = 0.0, False, False, False
        else:
            sched = SGLangScheduler(self.cost, self.cfg, self.kv_capacity_tokens, self.cal.frontend_s)
        sched.macro = self.macro_steps
        return sched

    def too_long(self, input_len: int, output_len: int) -> bool:
        return input_len + output_len > self.max_model_len or input_len < 1

    def run(self, requests: Sequence[Request], *, concurrency: int | None = None,
            max_sim_time_s: float | None = None) -> list[RequestRecord]:
        """Serve the requests in virtual time; open loop by arrival_s, or closed loop with `concurrency`.

        Data parallel: `dp` independent replicas; requests are dealt round-robin in arrival order (a
        load balancer that keeps replicas evenly loaded), closed-loop clients split evenly."""
        # a run makes no reference cycles, only many small objects: the cycle collector would only walk
        # them (about 10 % of a run's CPU time); refcounting still frees everything
        enabled = gc.isenabled()
        gc.disable()
        try:
            if self.dp <= 1 or len(requests) < 2:
                return self._run(requests, concurrency, max_sim_time_s)
            order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
            out: list[RequestRecord | None] = [None] * len(requests)
            for r in range(self.dp):
                idx = order[r::self.dp]
                if not idx:
                    continue
                conc = None if concurrency is None else max(1, (concurrency + self.dp - 1 - r) // self.dp)
                for i, rec in zip(idx, self._run([requests[i] for i in idx], conc, max_sim_time_s), strict=True):
                    out[i] = rec
            return [rec for rec in out if rec is not None]
        finally:
            if enabled:
                gc.enable()

    def _run(self, requests: Sequence[Any], concurrency: int | None,
             max_sim_time_s: float | None) -> list[RequestRecord]:
        """One replica serving all of `requests`, its tokens streamed by the API server when `stream_tok_s` is on.

        With `api_passes` too, new requests queue for that server behind its streaming (tuner/sim/api_server.py):
        the run is repeated, each pass with the ingress times the last pass's tokens imply."""
        tok_s = self.cal.stream_tok_s
        out = self._run_once(requests, concurrency, max_sim_time_s, None)
        if not tok_s:
            return out
        passes = self.cal.api_passes
        chunk_s = self.cal.stream_chunk_s
        if not passes:
            if chunk_s:
                api_rounds(out, tok_s, chunk_s)
            else:
                stream_late(out, tok_s)
            return out
        # the fixed share (HTTP, validation, the hop to the engine) runs on the event loop, in line with the
        # streaming; tokenising the prompt runs beside it (off the loop), a delay that blocks no one
        service = np.full(len(requests), self.cal.ingress_s)
        draws = self._ingress_draws(len(requests))
        if draws is not None:
            service *= np.asarray(draws)
        tokenise = np.array([self.cal.ingress_tok_s * int(r.input_len) for r in requests])
        for k in range(passes):
            last = k == passes - 1  # the last pass's tokens leave when the server sends them
            sends = np.array([rec.sent_s for rec in out])
            ready = (api_rounds(out, tok_s, chunk_s, sends, service, move=last) if chunk_s
                     else api_queue(out, tok_s, sends, service, move=last))
            if not last and ready is not None:
                out = self._run_once(requests, concurrency, max_sim_time_s, ready + tokenise)
        return out

    def _ingress_draws(self, n: int) -> list[float] | None:
        """Per request (in index order, so a request's draw does not depend on when it is served), the factor on its
        mean ingress time: gamma of mean 1 and cv `ingress_cv`, seeded by jitter_seed; None when the cv is 0."""
        cv = self.cal.ingress_cv
        if cv <= 0.0:
            return None
        rng = random.Random(7919 + self.cal.jitter_seed)  # its own stream: the launch draws stay as they were
        shape = 1.0 / (cv * cv)
        return [rng.gammavariate(shape, 1.0 / shape) for _ in range(n)]

    def _run_once(self, requests: Sequence[Any], concurrency: int | None, max_sim_time_s: float | None,
                  not_before: Any) -> list[RequestRecord]:
        """One pass of one replica (Request objects; typed Any so that the compiled build, tuner/sim/native.py,
        reads their fields as pure Python does: numpy integers pass unchecked). `not_before`: per request, the
        earliest time the engine may see it (the API server's ingress, from the pass before), or None."""
        sched = self.new_scheduler()
        n = len(requests)
        # int()/float(): the compiled Seq takes only Python ints and floats (numpy scalars from API callers)
        seqs = [Seq(i, int(r.input_len), int(r.output_len), float(r.arrival_s), int(r.prefix_group),
                    int(r.prefix_len)) for i, r in enumerate(requests)]
        sent = [False] * n
        errors: dict[int, str] = {}
        t_stop = math.inf if max_sim_time_s is None else float(max_sim_time_s)
        backlog: deque[int] = deque()
        # requests to send as (-send time, -index), sorted so that the next one (earliest, then lowest
        # index) is last: a peek and a pop are O(1); closed-loop sends are inserted in order
        pending: list[tuple[float, int]] = []
        if concurrency is not None:
            if concurrency < 1:
                raise ValueError(f"concurrency must be >= 1, got {concurrency}")
            backlog.extend(range(n))
            for _ in range(min(concurrency, n)):
                pending.append((-0.0, -backlog.popleft()))
            pending.sort()
        else:
            pending = sorted([(-s.arrival, -i) for i, s in enumerate(seqs)])
        mml = self.max_model_len
        bad_len = [s.inp + s.out > mml or s.inp < 1 for s in seqs]  # self.too_long: answered at once
        waiting = sched.waiting
        running = sched.running
        # the API server streams every running sequence's tokens before it reads, tokenizes and hands on a
        # new prompt: the engine sees a request per_seq x (sequences running) after it was sent
        per_seq = self.cal.ingress_per_seq_s
        rho_max = self.cal.ingress_rho_max  # the API server's busy share stretches that wait (0 = off)
        fixed_in, tok_in = self.cal.ingress_s, self.cal.ingress_tok_s  # per request and prompt token (0 = off)
        fifo_in = bool(fixed_in or tok_in)  # the API server takes requests in one at a time
        spread = self._ingress_draws(n) if fifo_in else None  # per request x its mean ingress (ingress_cv)
        api_free = -math.inf  # when the API server is done with the last request it handed on (ingress_s, ingress_tok_s)
        # vLLM async scheduling (and SGLang's overlap scheduler): the step starting now was scheduled when the last one started, so a request
        # that reached the engine during the last step waits one more step
        ahead = (bool(self.cal.sched_ahead) and self.flavour == "vllm") or self.sglang_overlap
        if isinstance(sched, VLLMScheduler):  # advance takes the extra step itself (see VLLMScheduler.advance)
            sched.ahead, sched.stop_at = ahead, t_stop
        finished = sched.finished
        advance = sched.advance
        inf = math.inf
        hold = isinstance(sched, VLLMScheduler) and sched.hold
        after = hold and sched.after_launch  # type: ignore[attr-defined]
        while True:
            now = sched.now
            next_arr = inf
            incoming = False
            gate = sched.last_start  # a request in after this waits one more step (ahead)
            if after and sched.sched_at > gate:  # type: ignore[attr-defined]
                gate = sched.sched_at  # type: ignore[attr-defined]
            while pending:
                t_send, i = pending[-1]
                t_send, i = -t_send, -i
                bad = bad_len[i]
                stretch = 1.0
                if per_seq and not bad:
                    wait = per_seq * len(running)
                    if rho_max and wait:
                        step = now - sched.last_start
                        rho = wait / step if step > 0.0 else rho_max
                        stretch = 1.0 / (1.0 - (rho if rho < rho_max else rho_max))
                        wait *= stretch
                    t_in = t_send + wait
                else:
                    t_in = t_send
                if fifo_in and not bad:  # one request at a time, in send order, on the CPU left over
                    service = (fixed_in + tok_in * seqs[i].inp) * stretch  # from streaming (rho)
                    if spread is not None:
                        service *= spread[i]
                    t_in = (t_in if t_in > api_free else api_free) + service
                if not_before is not None and not bad:
                    nb = float(not_before[i])
                    if nb > t_in:
                        t_in = nb
                if t_in > now:
                    next_arr = t_in
                    break
                if ahead and t_in > gate:
                    next_arr = t_in  # the step starting now was scheduled before it came: one more step
                    incoming = True  # (it is in the step after this one)
                    break
                pending.pop()
                if fifo_in and not bad:
                    api_free = t_in
                s = seqs[i]
                s.arrival = t_send
                sent[i] = True
                if bad:
                    errors[i] = TOO_LONG
                    if backlog:  # the client hears the 400 at once and sends its next request
                        insort(pending, (-t_send, -backlog.popleft()))
                else:
                    waiting.append(s)
            if now >= t_stop:
                break
            if hold:
                sched.incoming = incoming  # type: ignore[attr-defined]
                sched.t_next = next_arr  # type: ignore[attr-defined]
            progressed = advance(next_arr if next_arr < t_stop else t_stop)
            if finished:
                if backlog:
                    for s in finished:
                        if backlog:  # closed loop: the next request goes out when this one's last token arrives
                            insort(pending, (-s.done, -backlog.popleft()))  # type: ignore[operator]
                finished.clear()
            if not progressed:
                sched.idle = True
                if ahead:
                    sched.last_start = sched.now  # idle: nothing was in flight
                if next_arr < t_stop:
                    sched.now = max(sched.now, next_arr)
                    continue
                break
        if sched.segs:
            sched._flush()
        dec = sched.dec_times
        record = self._record
        out: list[RequestRecord] = []
        for i, (r, s) in enumerate(zip(requests, seqs, strict=True)):
            pieces = s.pieces
            # the common case inlined (Core.token_times): sent, done, one prefill and one decode stretch
            if sent[i] and s.state == DONE and len(pieces) == 1 and s.first is not None and i not in errors:
                p0 = pieces[0]
                if type(p0) is tuple and p0[0] > 0:
                    times = dec[p0[0] - 1:p0[1]]
                    times[0] = s.first
                    out.append(RequestRecord(r.id, r.cls, r.input_len, r.output_len, s.arrival, s.first, s.done,
                                             times, s.out, None, s.preempt, r.warmup))
                    continue
            out.append(record(sched, r, s, sent[i], errors.get(i), t_stop))
        return out

    def _record(self, sched: Core, r: Any, s: Seq, sent: bool, error: str | None,
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


def _rebuild(kw: dict[str, Any], macro_steps: bool) -> SimulatedEngine:
    eng = SimulatedEngine(**kw)
    eng.macro_steps = macro_steps
    return eng
