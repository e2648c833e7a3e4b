"""vLLM V1-style scheduling: one token budget per step shared by decodes and (chunked) prefills.

Order within a step, as in vLLM's V1 scheduler: running sequences first (decodes, then partial
prefills), then waiting sequences FCFS while `max_num_seqs`, the token budget and free KV blocks
allow. When a running sequence cannot get a block, the newest running sequence is preempted
(recompute) and no waiting sequence is admitted in that step.

Output one step behind for prompts (`Calibration.prompt_defer`, 0 = off): measured on the H200 per-request
records, the step that carries a new prompt hands out its decodes' tokens before all of the prompt's work
is done; the next step carries the rest (a share of the prompt's extra time) and the new request's first
token. Modelled as: a step with prompt chunks lasts its cost minus `prompt_defer` x (its cost above the same
step without chunks); the next step lasts that much longer, and a prompt completed in the step gets its
first token (and joins the decodes) at the next step's end.
With `Calibration.prompt_lead_tok_s` set, the most a prompt step's decodes wait for is that time per prompt token
the step carries (not `prompt_lead_max_s`): the CPU work of the step's new prompt tokens, as the per-request
timelines show (benchmarks/prompt_steps.py: 21-40 ms for a 2048-token prompt on Qwen3-8B, -14B and -32B alike).
Shipped instead of all of these (`Calibration.prompt_hold`, `_clock` / `_held`): a prompt step's launch holds the
tokens of the step before it, one launch at a time, and the first tokens leave with the prompt step (docs/sim.md).
"""

from __future__ import annotations

import math
import random
from heapq import heappop
from typing import Any

from tuner.sim.core import DECODE, PREFILL, Core, Seq
from tuner.sim.cost import StepCost


class VLLMScheduler(Core):
    def __init__(self, cost: StepCost, cfg: dict[str, Any], kv_tokens: int, frontend_s: float) -> None:
        graph = 0 if cfg["enforce_eager"] else cfg["max_cudagraph_capture_size"]
        super().__init__(cost, cfg["block_size"], kv_tokens, frontend_s, cfg["enable_prefix_caching"], graph)
        self.mbt: int = cfg["max_num_batched_tokens"]
        self.mns: int = cfg["max_num_seqs"]
        self.chunked: bool = cfg["enable_chunked_prefill"]
        self.max_partial: int = max(1, cfg["max_num_partial_prefills"])
        thr = cfg["long_prefill_token_threshold"] or 0
        self.threshold: int = thr if thr > 0 else self.mbt  # V1 caps every chunk at the threshold when set
        self.defer = 0.0  # Calibration.prompt_defer (set by the engine)
        self.carry = 0.0  # deferred prompt work the next step carries
        self.lead_max = math.inf  # Calibration.prompt_lead_max_s (0 there = no limit; set by the engine)
        self.lead_tok = 0.0  # Calibration.prompt_lead_tok_s (0 = off: lead_max applies; set by the engine)
        self.defer_max = math.inf  # Calibration.prompt_defer_max_s (0 there = no limit; set by the engine)
        self.cpu_tok = 0.0  # Calibration.prompt_cpu_tok_s (0 = off; set by the engine)
        self.cpu_step = 0.0  # Calibration.prompt_cpu_step_s (0 = off)
        self.cpu_floor = False  # either is on
        self.cpu_cv = 0.0  # Calibration.prompt_cpu_step_cv (0 = off; set by the engine)
        self.launch = False  # Calibration.prompt_lead_cpu (set by the engine): the prompt step's launch holds the decodes
        self.serial = 0.0  # Calibration.prompt_launch_serial: the launch's share before the GPU starts the step
        self.hold = False  # Calibration.prompt_hold (set by the engine, which then turns the forms above off)
        self.incoming = False  # set by the engine loop: a request reached the engine during this step's scheduling
        self.gpu_ready = -math.inf  # with the hold: the GPU's next step waits for this much of its launch
        self.cpu_free = -math.inf  # with the hold: when the engine core's CPU is done launching the last prompt step
        self.launched = -math.inf  # with the hold: the next step's launch ends then (its GPU work cannot end before)
        self.after_launch = False  # Calibration.sched_after_launch (set by the engine; with the hold only)
        self.sched_at = -math.inf  # with after_launch: when the last step's launch ended (the next one is scheduled then)
        self.t_next = math.inf  # with after_launch 2: when the next request reaches the engine (the engine sets it)
        self.peek = False
        self.tail = cost.o_step if cost.o_step > 0.0 else 1e-6  # with the hold: what a step runs after its launch
        # draws the prompt steps' CPU time when cpu_cv is on; seeded per run (Calibration.jitter_seed, set by the
        # engine): the same sends give the same records, and configs compared in one study see the same draws
        self.rng = random.Random(0)
        self.admit_cpu = 0.0  # Calibration.admit_cpu_s (0 = off; set by the engine)
        self.admit_step = 0.0  # Calibration.admit_step_s (0 = off; set by the engine)
        self.admit_on = False  # either is set
        self.lagged: list[Seq] = []  # prompts completed last step: first token at this step's end
        self.width = cost.width
        # set by SimulatedEngine._run: async scheduling on (Calibration.sched_ahead) and the run's time limit
        self.ahead = False
        self.stop_at = math.inf

    def _deferred(self, extra: float, ptoks: int) -> float:
        """The part of a prompt step's extra time that goes to the next step: `prompt_defer` of it, and at
        least what lies beyond the lead (the decodes' tokens wait for at most that much prompt work): the step's
        `ptoks` prompt tokens x `prompt_lead_tok_s` where set, else `prompt_lead_max_s`."""
        d = extra * self.defer
        over = extra - (ptoks * self.lead_tok if self.lead_tok else self.lead_max)
        d = over if over > d else d
        return d if d <= self.defer_max else self.defer_max

    def _cpu_floor(self, dur: float, n: int, ctx: float, ptoks: int, spec: dict[str, Any] | None = None) -> float:
        """A prompt step's length with `prompt_cpu_tok_s` / `prompt_cpu_step_s`: at least the step's n decodes alone
        (none: nothing) plus the CPU time of the step and of its `ptoks` new prompt tokens, which overlaps the GPU's
        work on them."""
        base = self.cost.step(n, n, ctx, ctx, n <= self.graph_max, **(spec or {})) if n else 0.0
        floor = base + self._drawn(self.cpu_step) + ptoks * self.cpu_tok
        return floor if floor > dur else dur

    def _launch(self, dur: float, n: int, ctx: float, spec: dict[str, Any] | None = None) -> float:
        """With `prompt_lead_cpu`: how long after its start a prompt step of GPU time `dur` hands out its decodes'
        tokens, and what it carries to the next step. The engine core launches it (CPU, drawn per step) while the GPU
        finishes the step before, and hands out the step before's tokens only then; here that wait is charged to this
        step: its decodes' tokens go out after the longer of the launch and their own decode step (+ the work carried
        in), and the rest of its GPU work goes to the next step, whose end brings the prompts' first tokens."""
        base = self.cost.step(n, n, ctx, ctx, n <= self.graph_max, **(spec or {})) if n else 0.0
        carry = self.carry
        lead = base + carry
        cpu = self._drawn(self.cpu_step)
        if cpu > lead:
            lead = cpu
        start = self.serial * cpu  # the GPU starts this step's work after the step before's and this much launch
        gpu = dur + (carry if carry > start else start)
        self.carry = gpu - lead if gpu > lead else 0.0
        return lead

    def _next_has_prompt(self, chunks: list[tuple[Seq, int]]) -> bool:
        """Whether the step after this one carries prompt work: a request that reached the engine meanwhile (with the
        peek, also one that reaches it before this step's launch ends), one still waiting that may be admitted (the
        head, FCFS), or a prefill this step leaves unfinished."""
        if self.waiting:  # first come, first served: behind a blocked head nothing new is admitted
            if not self._head_blocked():
                return True
        elif (self.incoming or self.peek and self.t_next <= self.sched_at) and len(self.running) < self.mns:
            return True
        done = 0
        for s, c in chunks:
            if s.L + c < s.target:
                return True
            done += 1
        return len(self.prefilling) > done

    def _clock(self, dur: float, chunks: list[tuple[Seq, int]]) -> tuple[float, float]:
        """(start, output time) of a step of GPU time `dur` that carries `chunks`; moves the clock to its GPU end.
        With the hold it starts when the GPU may (`prompt_launch_serial`), ends no sooner than its launch and hands
        out as `_held` says."""
        now = self.now
        if not self.hold:
            self.now = end = now + dur
            return now, end + self.frontend
        if self.gpu_ready > now:
            now = self.gpu_ready
        if self.after_launch:  # the next step is scheduled once this one is launched
            self.sched_at = now if now > self.launched else self.launched
        end = now + dur
        if self.launched >= end:  # the step's sampling and sync follow its last launched kernel
            end = self.launched + self.tail
        self.now = end
        return now, self._held(now, end, self._next_has_prompt(chunks)) + self.frontend

    def _held(self, start: float, end: float, nxt: bool) -> float:
        """With `prompt_hold`: when a step that started at `start` and whose GPU work ends at `end` hands out its
        tokens. Before a prompt step, after the longer of that and the prompt step's launch (drawn), which starts as
        this step does (async scheduling) or when the CPU is done with the launch before it; the GPU starts the prompt
        step `prompt_launch_serial` into the launch and cannot end it before the launch ends."""
        out = end
        if nxt:
            begin = start if start > self.cpu_free else self.cpu_free
            self.cpu_free = self.launched = ready = begin + self._drawn(self.cpu_step)
            if ready > out:
                out = ready
            self.gpu_ready = begin + self.serial * (ready - begin)
        return out

    def _drawn(self, mean: float) -> float:
        """A prompt step's fixed CPU time: `mean`, or with `cpu_cv` a gamma draw of that mean and spread."""
        if self.cpu_cv > 0.0 and mean > 0.0:
            shape = 1.0 / (self.cpu_cv * self.cpu_cv)
            return self.rng.gammavariate(shape, mean / shape)
        return mean

    def _admit_late(self, admitted: int) -> float:
        """How much later a step that admits `admitted` new requests ends: their CPU work (`admit_step_s` for the
        step, drawn like the floor's with `cpu_cv`, + `admit_cpu_s` each) runs while the GPU works on the step before
        (async scheduling), so only what outlasts that step shows; after an idle engine, all of it."""
        late = (self._drawn(self.admit_step) + self.admit_cpu * admitted
                - (0.0 if self.idle else self.now - self.last_start))
        return late if late > 0.0 else 0.0

    def _newest(self) -> Seq:
        return self.running[next(reversed(self.running))]

    def _head_blocked(self) -> bool:
        """True when the first waiting sequence cannot be admitted now (and decodes only make it worse)."""
        if not self.waiting or len(self.running) >= self.mns:
            return True
        s = self.waiting[0]
        rem = s.target - s.L
        budget = self.mbt - self.n_dec * (self.cost.for_n(self.n_dec).width if self.scheduled else self.width)
        c = min(rem, budget, self.threshold)
        if c <= 0 or (c < rem and not self.chunked):
            return True
        nb = -(-(s.L + c) // self.bs) - s.blocks
        return nb > self.free

    def advance(self, t_event: float) -> bool:
        """Run one step, or many decode-only steps up to the next event. False when idle."""
        n = self.n_dec
        # (speculative decoding under the heat term: no decode runs, each step is scheduled: see Core._decode_run)
        if (n and self.macro and not self.prefilling and not self.carry and not (self.heat_k and self.spec_on)
                and not (self.hold and (self.incoming or self.launched > self.now))):
            # (with the hold, one step at a time before a prompt step and until its launch is over)
            waiting = self.waiting
            if waiting:
                # what step() would do first when the head fits (then it is not blocked); else the usual checks
                if len(waiting) == 1 and not self.spec_on and not self.heat_k and self._prompt_step(n):
                    return True
                if len(self.running) < self.mns and not self._head_blocked():
                    return self.step()
            # the next finish (Core._clean_heap, inlined: this runs once per event)
            heap = self.heap
            while heap:
                top = heap[0]
                if top[1] == top[3].ver and top[3].state == DECODE:
                    break
                heappop(heap)
            limit = (heap[0][0] if heap else 1 << 60) - self.nd
            k = limit if self.free // n * self.bs >= limit else self._kv_steps(limit)
            if k >= 2:
                if waiting:
                    self._decode_run(k, math.inf)
                    return True
                nd = self.nd
                self._decode_run(k, t_event)
                if (self.ahead and not self.hold and self.nd - nd < k
                        and self.last_start < t_event <= self.now < self.stop_at):
                    # cut by an arrival that came during the run's last step: the engine's loop would now call
                    # advance(t_event) again for the one step async scheduling adds; take it here (same checks,
                    # same call; nothing finished, so the heap, n and the arrival's ingress time are unchanged)
                    limit = heap[0][0] - self.nd if heap else (1 << 60) - self.nd
                    k = limit if self.free // n * self.bs >= limit else self._kv_steps(limit)
                    if k >= 2:
                        self._decode_run(k, t_event)
                return True
        return self.step()

    def step(self) -> bool:
        n = self.n_dec
        if n and not self.spec_on and not self.heat_k:
            if not self.waiting:
                for s in self.prefilling:
                    if s.L != s.target:
                        break
                else:  # decodes only (prompts done, their first tokens maybe due): the common step after a prompt's
                    j = self.nd
                    need = self.cnt[j % self.bs]
                    if need <= self.free:
                        return self._decode_step(n, j, need)
            elif len(self.waiting) == 1 and not self.prefilling and self._prompt_step(n):
                return True
        bs = self.bs
        j = self.nd
        preempted = False
        # tokens each decode gets this step (1 without speculative decoding)
        m = self._spec_tokens(j) if self.spec_on else 1
        need = (self.cnt[j % bs] if m == 1 else self._blocks_for(j, m)) if self.n_dec else 0
        while need > self.free:
            victim = self._newest()
            if victim.state == DECODE and victim.phase == j % bs:
                need -= 1
            self._preempt(victim)
            preempted = True
        free = self.free - need
        budget = self.mbt - self.n_dec * (self.cost.for_n(self.n_dec).width if self.scheduled else self.width)
        chunks: list[tuple[Seq, int]] = []
        partial = 0
        threshold = self.threshold
        if self.prefilling:
            self.free = free
            for s in list(self.prefilling):
                if budget <= 0:
                    break
                if s.state != PREFILL or s.L == s.target:  # completed, first token due next step
                    continue
                rem = s.target - s.L
                c = min(rem, budget, threshold)
                nb = -(-(s.L + c) // bs) - s.blocks
                while nb > self.free:
                    victim = self._newest()
                    self._preempt(victim)
                    preempted = True
                    if victim is s:
                        break
                if s.state != PREFILL:
                    continue
                self.free -= nb
                s.blocks += nb
                chunks.append((s, c))
                budget -= c
                partial += c < rem
            free = self.free
        waiting = self.waiting
        admitted = 0
        if not preempted and waiting:
            running, prefilling = self.running, self.prefilling
            mns, chunked = self.mns, self.chunked
            while waiting and budget > 0 and len(running) < mns:
                s = waiting[0]
                if self.prefix_caching and s.pgroup >= 0:  # (no group: never a hit)
                    self._apply_prefix_hit(s)
                L = s.L
                rem = s.target - L
                c = rem if rem < budget else budget
                if threshold < c:
                    c = threshold
                if c < rem and (not chunked or partial >= self.max_partial):
                    break
                nb = -(-(L + c) // bs) - s.blocks
                if nb > free:
                    break
                waiting.popleft()
                s.state = PREFILL
                running[s.idx] = s
                prefilling.append(s)
                free -= nb
                s.blocks += nb
                chunks.append((s, c))
                budget -= c
                admitted += 1
                partial += c < rem
        self.free = free
        n = self.n_dec
        if not chunks and not n:
            if self.lagged:  # nothing else to run: the deferred work ends, the first tokens go out
                self.now += self.carry
                self.carry = 0.0
                self._sample_lagged(self.now + self.frontend)
                return True
            return False
        graph_max = self.graph_max
        ctx = float(self.sum_l + n)
        tokens, logits, pairs, kv = n, n, ctx, ctx
        for s, c in chunks:
            tokens += c
            L = s.L
            pairs += c * (L + (c + 1) * 0.5)
            kv += L + c
            if L + c == s.target:
                logits += 1
        cost_step = self.cost.step
        if not self.spec_on and not self.heat_k:
            dur = cost_step(tokens, logits, pairs, kv, tokens <= graph_max)
            if self.launch and chunks:
                dur = self._launch(dur, n, ctx)
            else:
                if self.cpu_floor and chunks:
                    dur = self._cpu_floor(dur, n, ctx, tokens - n)
                if admitted and self.admit_on:
                    dur += self._admit_late(admitted)
            if self.defer and not (self.launch and chunks) or self.carry and not chunks:
                extra = 0.0
                if chunks and n:
                    extra = dur - cost_step(n, n, ctx, ctx, n <= graph_max)
                    extra = self._deferred(extra if extra > 0.0 else 0.0, tokens - n)
                dur += self.carry - extra
                self.carry = extra
        else:
            spec: dict[str, Any] = {"decodes": n, "decode_ctx": ctx} if self.spec_on else {}
            if self.heat_k:
                m_clk = self._flop_mult(self.now)
                dur = cost_step(tokens, logits, pairs, kv, tokens <= graph_max, m_clk, **spec)
                self._heat_add(dur, self.cost.flop_time(tokens, logits, pairs) * m_clk / dur)
            else:
                dur = cost_step(tokens, logits, pairs, kv, tokens <= graph_max, **spec)
            if self.launch and chunks:
                dur = self._launch(dur, n, ctx, spec)
            else:
                if self.cpu_floor and chunks:
                    dur = self._cpu_floor(dur, n, ctx, tokens - n, spec)
                if admitted and self.admit_on:
                    dur += self._admit_late(admitted)
            if self.defer and not (self.launch and chunks) or self.carry and not chunks:
                extra = 0.0
                if chunks and n:
                    base = cost_step(n, n, ctx, ctx, n <= graph_max, **spec)
                    extra = self._deferred(max(dur - base, 0.0), tokens - n)
                dur += self.carry - extra
                self.carry = extra
        now, t_out = self._clock(dur, chunks)
        self.last_start = now
        self.idle = False
        self.steps += 1
        if n:
            self.segs.extend((t_out, 0.0, 0.0, m))
            self.nd = jm = j + m
            self.sum_l += n * m
            self.sum_rem -= n * m
            heap = self.heap
            if heap and heap[0][0] <= jm:
                self._pop_finished(t_out)
        if self.lagged:
            self._sample_lagged(t_out)
        if chunks:
            lag = self.defer > 0.0 and n > 0 or self.launch
            for s, c in chunks:
                s.L += c
                self.prompt_tokens += c
                if s.L == s.target:
                    if lag:
                        self.lagged.append(s)
                    else:
                        self._sampled(s, t_out)
        return True

    def _prompt_step(self, n: int) -> bool:
        """`step` for n decodes and one waiting prompt that fits whole (no prefix lookup, no preemption);
        the same operations. False, with nothing changed, when that is not the case."""
        s = self.waiting[0]
        if self.prefix_caching and s.pgroup >= 0 or len(self.running) >= self.mns:
            return False
        bs = self.bs
        j = self.nd
        need = self.cnt[j % bs]
        L = s.L
        c = s.target - L
        budget = self.mbt - n * self.width
        if budget <= 0 or c > budget or c > self.threshold:
            return False
        nb = -(-(L + c) // bs) - s.blocks
        free = self.free - need - nb
        if need > self.free or free < 0:
            return False
        self.waiting.popleft()
        s.state = PREFILL
        self.running[s.idx] = s
        self.prefilling.append(s)
        self.free = free
        s.blocks += nb
        graph_max = self.graph_max
        ctx = float(self.sum_l + n)
        tokens = n + c
        cost_step = self.cost.step
        dur = cost_step(tokens, n + 1, ctx + c * (L + (c + 1) * 0.5), ctx + (L + c), tokens <= graph_max)
        defer = self.defer
        if self.launch:
            dur = self._launch(dur, n, ctx)
        else:
            if self.cpu_floor:
                dur = self._cpu_floor(dur, n, ctx, c)
            if self.admit_on:
                dur += self._admit_late(1)
        if defer and not self.launch:
            extra = dur - cost_step(n, n, ctx, ctx, n <= graph_max)
            extra = extra if extra > 0.0 else 0.0
            extra = (extra * defer if extra <= self.lead_max and not self.lead_tok and self.defer_max == math.inf
                     else self._deferred(extra, c))
            dur += self.carry - extra
            self.carry = extra
        now, t_out = self._clock(dur, [(s, c)])
        self.last_start = now
        self.idle = False
        self.steps += 1
        self.segs.extend((t_out, 0.0, 0.0, 1))
        self.nd = j + 1
        self.sum_l += n
        self.sum_rem -= n
        heap = self.heap
        if heap and heap[0][0] <= j + 1:
            self._pop_finished(t_out)
        if self.lagged:
            self._sample_lagged(t_out)
        s.L += c
        self.prompt_tokens += c
        if defer > 0.0 or self.launch:  # the first token lags to the next step's end
            self.lagged.append(s)
        else:
            self._sampled(s, t_out)
        return True

    def _decode_step(self, n: int, j: int, need: int) -> bool:
        """`step` when it has only decodes to run and their blocks are free: the same operations, less work."""
        self.free -= need
        ctx = float(self.sum_l + n)
        dur = self.cost.step(n, n, ctx, ctx, n <= self.graph_max)
        if self.carry:  # no prompt in this step: the deferred work is added, nothing is deferred
            dur += self.carry
            self.carry = 0.0
        now, t_out = self._clock(dur, [])
        self.last_start = now  # (idle is already False: after an idle engine the first step admits a prompt)
        self.steps += 1
        self.segs.extend((t_out, 0.0, 0.0, 1))
        self.nd = j + 1
        self.sum_l += n
        self.sum_rem -= n
        heap = self.heap
        if heap and heap[0][0] <= j + 1:
            self._pop_finished(t_out)
        if self.lagged:
            self._sample_lagged(t_out)
        return True

    def _sample_lagged(self, t_out: float) -> None:
        lagged, self.lagged = self.lagged, []
        for s in lagged:
            if s.state == PREFILL and s.L == s.target:  # not preempted meanwhile
                self._sampled(s, t_out)
