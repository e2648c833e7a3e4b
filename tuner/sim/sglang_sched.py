"""SGLang-style scheduling: separate prefill and decode batches, admission by estimated future use.

Each iteration, as SGLang's scheduler does: if a prefill batch can be formed it runs alone
(prefill-only forward); otherwise all running sequences decode one token. A waiting sequence is
admitted while `max_running_requests`, `max_prefill_tokens` and the memory estimate allow: free
KV tokens minus, for every running sequence, its remaining output x `new_token_ratio` (which
starts at 0.7 x `schedule_conservativeness` and decays per decode step). One long prompt at a
time is prefilled in chunks of `chunked_prefill_size`. When a decode step runs out of KV, the
sequences with the fewest generated tokens are retracted (recomputed later) and the ratio is
raised. Policies: fcfs, lpm (longest cached prefix first; `dfs-weight` is treated as lpm), lof
(longest output first) and random.
"""

from __future__ import annotations

import math
import random
from typing import Any

from tuner.sim.core import DECODE, PREFILL, Core, Seq
from tuner.sim.cost import StepCost

CLIP_MAX_NEW_TOKENS = 4096  # SGLang caps a request's output estimate at this
RETRACT_DECODE_STEPS = 20
DECAY_STEPS = 600


class SGLangScheduler(Core):
    def __init__(self, cost: StepCost, cfg: dict[str, Any], kv_tokens: int, frontend_s: float) -> None:
        graph = 0 if cfg["disable_cuda_graph"] else cfg["cuda_graph_max_bs"]
        super().__init__(cost, cfg["page_size"], kv_tokens, frontend_s, not cfg["disable_radix_cache"], graph)
        self.max_running: int = cfg["max_running_requests"]
        chunk = cfg["chunked_prefill_size"]
        self.chunk: int = chunk if chunk and chunk > 0 else 1 << 40
        self.max_prefill: int = cfg["max_prefill_tokens"]
        self.policy: str = cfg["schedule_policy"]
        cons = cfg["schedule_conservativeness"]
        self.init_ratio = min(0.7 * cons, 1.0)
        self.min_ratio = min(self.init_ratio, 0.14 * cons)
        self.decay = (self.init_ratio - self.min_ratio) / DECAY_STEPS
        self.ratio = self.init_ratio
        self.chunked_seq: Seq | None = None
        self.rng = random.Random(0)

    def abort(self, s: Seq) -> None:
        if self.chunked_seq is s:
            self.chunked_seq = None
        super().abort(s)

    def _order_waiting(self) -> None:
        if self.policy == "fcfs" or len(self.waiting) < 2:
            return
        items = list(self.waiting)
        if self.policy in ("lpm", "dfs-weight"):
            cached = self.cached_groups
            items.sort(key=lambda s: -(s.plen if s.pgroup in cached else 0))
        elif self.policy == "lof":
            items.sort(key=lambda s: -(s.out - s.gen))
        elif self.policy == "random":
            self.rng.shuffle(items)
        self.waiting.clear()
        self.waiting.extend(items)

    def _prefill_batch(self) -> list[tuple[Seq, int]]:
        page = self.bs
        rem_total = self.free * page - self.sum_rem * self.ratio
        rem_input = self.max_prefill
        rem_chunk = self.chunk
        batch: list[tuple[Seq, int]] = []
        s = self.chunked_seq
        if s is not None:
            c = min(s.target - s.L, rem_chunk)
            nb = -(-(s.L + c) // page) - s.blocks
            if nb > self.free:
                return []
            self.free -= nb
            s.blocks += nb
            batch.append((s, c))
            rem_input -= c
            rem_chunk -= c
            self.chunked_seq = None if s.L + c == s.target else s
        if self.chunked_seq is not None:
            return batch
        self._order_waiting()
        waiting = self.waiting
        while waiting and rem_input > 0 and rem_chunk > 0 and len(self.running) < self.max_running:
            s = waiting[0]
            self._apply_prefix_hit(s)
            rem = s.target - s.L
            est = rem + min(s.out - s.gen, CLIP_MAX_NEW_TOKENS) * self.ratio
            if est > rem_total:
                break
            if rem > rem_chunk or (rem > rem_input and batch):
                c = min(rem_chunk, rem_input) // page * page
                if c <= 0:
                    break
            else:
                c = rem
            nb = -(-(s.L + c) // page) - s.blocks
            if nb > self.free:
                break
            waiting.popleft()
            s.state = PREFILL
            self.running[s.idx] = s
            self.prefilling.append(s)
            self.free -= nb
            s.blocks += nb
            batch.append((s, c))
            rem_total -= est
            rem_input -= c
            rem_chunk -= c
            if c < rem:
                self.chunked_seq = s
                break
        return batch

    def _admissible(self) -> bool:
        return bool(self.waiting) and len(self.running) < self.max_running

    def advance(self, t_event: float) -> bool:
        """Run one iteration, or many decode-only steps when nothing can be admitted."""
        if self.chunked_seq is not None or self._admissible():
            batch = self._prefill_batch()
            if batch:
                self._run_prefill(batch)
                return True
        if self.macro and self.n_dec and self.chunked_seq is None and not self.prefilling:
            j = self.nd
            k = self._kv_steps(self._clean_heap() - j)
            if self.waiting:
                if len(self.running) < self.max_running:
                    k = self._steps_until_admit(k)
                    if self.policy == "fcfs":  # arrivals queue behind the blocked head
                        t_event = math.inf
                else:
                    t_event = math.inf
            if k >= 2:
                self._decode_run(k, t_event)
                done = self.nd - j  # the run may stop early at t_event
                self.ratio = max(self.min_ratio, self.ratio - self.decay * done)
                return True
        if not self.n_dec:
            return False
        self._decode_step()
        return True

    def _steps_until_admit(self, limit: int) -> int:
        """Decode steps until the waiting head passes the admission estimate (which moves every step)."""
        s = self.waiting[0]
        self._apply_prefix_hit(s)
        page, n, cnt = self.bs, self.n_dec, self.cnt
        rem = s.target - s.L
        c = min(self.chunk, self.max_prefill) // page * page if rem > self.chunk else rem
        nb = -(-(s.L + c) // page) - s.blocks
        out_left = min(s.out - s.gen, CLIP_MAX_NEW_TOKENS)
        j = self.nd
        free = self.free
        for k in range(1, limit + 1):
            free -= cnt[(j + k - 1) % page]
            r = max(self.min_ratio, self.ratio - self.decay * k)
            if rem + out_left * r <= free * page - (self.sum_rem - n * k) * r and nb <= free:
                return k
        return limit

    def step(self) -> bool:
        if self.waiting or self.chunked_seq is not None:
            batch = self._prefill_batch()
            if batch:
                self._run_prefill(batch)
                return True
        if not self.n_dec:
            return False
        self._decode_step()
        return True

    def _run_prefill(self, batch: list[tuple[Seq, int]]) -> None:
        tokens = logits = 0
        pairs = kv = 0.0
        for s, c in batch:
            tokens += c
            pairs += c * (s.L + (c + 1) * 0.5)
            kv += s.L + c
            if s.L + c == s.target:
                logits += 1
        self.last_start = self.now
        self.now += self.cost.step(tokens, logits, pairs, kv, False)
        self.steps += 1
        t_out = self.now + self.frontend
        for s, c in batch:
            s.L += c
            self.prompt_tokens += c
            if s.L == s.target:
                self._sampled(s, t_out)

    def _decode_step(self) -> None:
        bs = self.bs
        j = self.nd
        need = self.cnt[j % bs]
        if need > self.free:
            decoding = sorted(
                (s for s in self.running.values() if s.state == DECODE),
                key=lambda s: (self.generated(s), -s.inp),
            )
            for s in decoding:
                if need <= self.free or self.n_dec <= 1:
                    break
                if s.phase == j % bs:
                    need -= 1
                self._preempt(s)
            total_dec = sum(self.generated(s) for s in self.running.values() if s.state == DECODE)
            total_max = sum(s.out for s in self.running.values() if s.state == DECODE)
            self.ratio = min(1.0, (total_dec + RETRACT_DECODE_STEPS * self.n_dec) / (total_max + 1))
            if need > self.free:  # a single sequence that cannot grow: nothing left to retract
                self._preempt(next(s for s in self.running.values() if s.state == DECODE))
                return
        self.free -= need
        n = self.n_dec
        self.last_start = self.now
        self.now += self._decode_cost()
        self.steps += 1
        t_out = self.now + self.frontend
        self._push_steps(t_out, 1)
        self.sum_l += n
        self.sum_rem -= n
        self.ratio = max(self.min_ratio, self.ratio - self.decay)
        self._pop_finished(t_out)
