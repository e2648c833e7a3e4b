"""Shared state of the discrete-event engine: sequences, the paged KV pool and decode bookkeeping.

Speed comes from three observations. (1) Every running sequence in its decode phase gets exactly one
token per decode step, so its token times are a contiguous slice of one shared list of decode-step
end times (`dec_times`); a sequence only stores where its slice starts. (2) Between events
(arrival, prefill, finish, KV pressure), decode-only steps differ only in their KV context, which
grows linearly, so k such steps are computed in closed form at once (`_decode_run`). (3) Nothing
reads those end times while the run goes on, only how many there are (`nd`): a run is stored as one
segment (fe, a, c2, k) and all segments become floats in one numpy pass when records are
built (`_flush`), with the same floating-point operations in the same order as one by one.

KV blocks are exact: a decoding sequence needs a new block when the position it writes is a
multiple of the block size, i.e. at decode indices j with j = dec_start - L0 (mod block size);
`cnt[r]` counts decoding sequences of each phase r, so a step's new blocks are `cnt[j % bs]`.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque

import numpy as np

from tuner.sim.cost import StepCost

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
_INF = math.inf


class Seq:
    """One request inside the engine."""

    __slots__ = ("idx", "inp", "out", "pgroup", "plen", "arrival", "gen", "L", "target", "blocks",
                 "dec_start", "g0", "L0", "phase", "ver", "pieces", "preempt", "first", "done", "state",
                 "hit")

    def __init__(self, idx: int, inp: int, out: int, arrival: float, pgroup: int = -1, plen: int = 0) -> None:
        self.idx, self.inp, self.out, self.arrival = idx, inp, out, arrival
        self.pgroup, self.plen = pgroup, plen
        self.gen = self.L = self.blocks = self.dec_start = self.g0 = self.L0 = self.phase = 0
        self.ver = self.preempt = self.hit = 0
        self.target = inp
        self.pieces: list[float | tuple[int, int]] = []  # single token times or dec_times slices
        self.first: float | None = None
        self.done: float | None = None
        self.state = WAITING


class Core:
    """KV pool, running set, decode calendar; flavour policies subclass this and define `step`."""

    def __init__(self, cost: StepCost, block: int, kv_tokens: int, frontend_s: float,
                 prefix_caching: bool, graph_max: int) -> None:
        self.cost = cost
        self.scheduled = cost.scheduled  # speculative K by batch size: the spec terms change with n_dec
        self.spec_on = cost.spec is not None
        self.bs = block
        self.total_blocks = kv_tokens // block
        self.free = self.total_blocks
        self.frontend = frontend_s
        self.prefix_caching = prefix_caching
        self.graph_max = graph_max
        self.cached_groups: set[int] = set()
        self.running: dict[int, Seq] = {}
        self.prefilling: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.n_dec = 0
        self.sum_l = 0  # KV tokens of decoding sequences
        self.sum_rem = 0  # tokens still to generate by decoding sequences
        self.cnt = [0] * block
        self.heap: list[tuple[int, int, int, Seq]] = []
        self.dec_times = array("d")  # decode-step end times, the first `nd - pending` of them
        self.nd = 0  # decode steps so far (len(dec_times) once flushed)
        self.segs: list[float] = []  # pending runs, flat: fe, a, c2, k for each (one list: cheap to convert)
        self.now = 0.0
        self.finished: list[Seq] = []
        self.preemptions = 0
        self.prompt_tokens = 0
        self.steps = 0
        self.last_start = -math.inf  # when the last step started (vLLM async scheduling: the next was scheduled then)
        self.idle = True  # no step since the engine last ran out of work (set by the engine loop)
        self._base: dict[int, float] = {}  # decode_base by batch size (it does not change within a run)
        # power-limited clock (Calibration.heat_slowdown / heat_tau_s; set by the engine, 0 = off)
        self.heat_k = 0.0
        self.heat_tau = 2.0
        self.heat = 0.0  # moving average of the FLOP-bound share of engine time, at heat_t
        self.heat_t = 0.0
        self.macro = True  # closed-form decode runs; False = one step at a time (same results, slower)
        self.spec_frac = 0.0  # speculative decoding: fractional tokens carried to the next verify step

    # ---- sequence transitions -------------------------------------------------------------
    def step(self) -> bool:
        """One scheduler step (the vLLM and SGLang schedulers each define it); False when idle."""
        raise NotImplementedError

    def advance(self, t_event: float) -> bool:
        """Run steps up to `t_event` (each scheduler defines it)."""
        raise NotImplementedError

    def _enter_decode(self, s: Seq) -> None:
        s.state = DECODE
        s.dec_start = j = self.nd
        s.g0, s.L0 = s.gen, s.L
        s.phase = (j - s.L) % self.bs
        self.cnt[s.phase] += 1
        self.n_dec += 1
        self.sum_l += s.L
        self.sum_rem += s.out - s.gen
        heapq.heappush(self.heap, (j + s.out - s.gen, s.ver, s.idx, s))

    def _leave_decode(self, s: Seq) -> None:
        j = self.nd
        m = j - s.dec_start
        over = max(0, m - (s.out - s.g0))  # a verify step of several tokens can pass the last one
        m -= over
        s.gen, s.L = s.g0 + m, s.L0 + m
        if m:
            s.pieces.append((s.dec_start, j - over))
        self.cnt[s.phase] -= 1
        self.n_dec -= 1
        self.sum_l -= s.L + over
        self.sum_rem -= s.out - s.gen - over
        s.blocks = -(-(s.L + over) // self.bs)  # blocks given for the passed positions are freed too
        s.ver += 1

    def _spec_tokens(self, j: int) -> int:
        """Tokens every decoding sequence gets from this step: 1, or with speculative decoding tau on
        average (whole tokens, the fraction carried over); 1 when the KV pool cannot hold more."""
        if self.cost.spec is None or not self.n_dec:
            return 1
        self.spec_frac += self.cost.for_n(self.n_dec).tau
        m = int(self.spec_frac)
        self.spec_frac -= m
        if m > 1 and self._blocks_for(j, m) > self.free:
            return 1
        return max(m, 1)

    def _release(self, s: Seq) -> None:
        if s.state == DECODE:
            self._leave_decode(s)
        elif s.state == PREFILL:
            self.prefilling.remove(s)
        self.free += s.blocks
        s.blocks = 0
        self.running.pop(s.idx, None)

    def _preempt(self, s: Seq) -> None:
        """Recompute preemption: drop the sequence's KV, requeue it first (vLLM and SGLang both do this)."""
        self._release(s)
        s.L = 0
        s.target = s.inp + s.gen
        s.state = WAITING
        s.preempt += 1
        self.preemptions += 1
        self.waiting.appendleft(s)

    def _finish(self, s: Seq, t_out: float) -> None:
        self._release(s)
        s.state = DONE
        s.done = t_out
        self.finished.append(s)

    def _apply_prefix_hit(self, s: Seq) -> None:
        """Cached full blocks of a shared prefix count as computed (the first prefill only)."""
        if self.prefix_caching and s.L == 0 and s.gen == 0 and s.pgroup in self.cached_groups:
            hit = min(s.plen, s.target - 1) // self.bs * self.bs
            if hit > 0:
                s.L = s.hit = hit

    def _sampled(self, s: Seq, t_out: float) -> None:
        """A prefill finished: the engine samples one token; the sequence decodes or is done."""
        s.gen += 1
        if s.first is None:
            s.first = t_out
        else:
            s.pieces.append(t_out)
        if s.pgroup >= 0 and s.L >= s.plen:
            self.cached_groups.add(s.pgroup)
        if s.gen >= s.out:
            self._finish(s, t_out)
        else:
            self.prefilling.remove(s)
            # _enter_decode, inlined (once per request)
            s.state = DECODE
            s.dec_start = j = self.nd
            s.g0 = s.gen
            s.L0 = L = s.L
            s.phase = ph = (j - L) % self.bs
            self.cnt[ph] += 1
            self.n_dec += 1
            self.sum_l += L
            left = s.out - s.gen
            self.sum_rem += left
            heapq.heappush(self.heap, (j + left, s.ver, s.idx, s))

    def _pop_finished(self, t_out: float) -> None:
        j = self.nd
        heap = self.heap
        heappop = heapq.heappop
        running, finished, cnt, bs = self.running, self.finished, self.cnt, self.bs
        while heap and heap[0][0] <= j:
            _, ver, _, s = heappop(heap)
            if ver == s.ver and s.state == DECODE:  # _finish (_release, _leave_decode) of a decoding sequence, inlined
                m = j - s.dec_start
                left = s.out - s.g0
                over = m - left if m > left else 0
                m -= over
                s.gen = gen = s.g0 + m
                s.L = L = s.L0 + m
                if m:
                    s.pieces.append((s.dec_start, j - over))
                cnt[s.phase] -= 1
                self.n_dec -= 1
                self.sum_l -= L + over
                self.sum_rem -= s.out - gen - over
                self.free += -(-(L + over) // bs)
                s.blocks = 0
                s.ver += 1
                running.pop(s.idx, None)
                s.state = DONE
                s.done = t_out
                finished.append(s)

    def _clean_heap(self) -> int:
        """Decode index at which the next sequence finishes (stale entries dropped)."""
        heap = self.heap
        while heap and (heap[0][1] != heap[0][3].ver or heap[0][3].state != DECODE):
            heapq.heappop(heap)
        return heap[0][0] if heap else 1 << 60

    # ---- decode-only runs -----------------------------------------------------------------
    def _kv_steps(self, limit: int) -> int:
        """How many decode steps fit in the free blocks (at most `limit`)."""
        n, bs, cnt, free = self.n_dec, self.bs, self.cnt, self.free
        j = self.nd
        cycles = free // n
        k = cycles * bs
        if k >= limit:
            return limit
        left = free - cycles * n
        for i in range(bs):
            c = cnt[(j + k + i) % bs]
            if c > left:
                return min(k + i, limit)
            left -= c
        return min(k + bs, limit)

    def _blocks_for(self, j: int, k: int) -> int:
        n, bs, cnt = self.n_dec, self.bs, self.cnt
        full, part = divmod(k, bs)
        used = full * n
        for i in range(part):
            used += cnt[(j + i) % bs]
        return used

    def _flop_mult(self, now: float) -> float:
        """How much slower FLOP-bound kernels run now (1.0 when the heat term is off)."""
        gap = now - self.heat_t
        if gap > 0:
            self.heat *= math.exp(-gap / self.heat_tau)
            self.heat_t = now
        return 1.0 + self.heat_k * self.heat

    def _heat_add(self, dur: float, share: float) -> None:
        d = math.exp(-dur / self.heat_tau)
        self.heat = self.heat * d + min(share, 1.0) * (1.0 - d)
        self.heat_t += dur

    def _decode_run(self, k: int, t_stop: float) -> None:
        """Run up to k decode-only steps in closed form; stop early at the step that ends past t_stop."""
        n = self.n_dec
        if self.heat_k:  # the clock moves every step: no closed form
            self._decode_run_clocked(k, t_stop)
            return
        cost = self.cost.for_n(n) if self.scheduled else self.cost  # per-batch-size K: the cost at K(n)
        dec_b = cost.dec_b_at(n)  # seconds per context token at this batch size
        cached = self._base.get(n)
        if cached is None:
            cached = self._base[n] = cost.decode_base(n, n <= self.graph_max)
        base = cached
        sum_l = self.sum_l
        a = base + dec_b * (sum_l + n)
        c2 = dec_b * n / 2.0
        now = self.now
        if t_stop < _INF:
            if t_stop - now <= 0:
                k = 1
            else:
                x = _steps_to_reach(a, c2, t_stop - now)
                if x < k:
                    k = x
        j = self.nd
        # KV blocks the run takes: every sequence one block per block-size steps, by its phase
        bs = self.bs
        part = k % bs
        used = k // bs * n
        if part:
            cnt = self.cnt
            r = j % bs
            if r + part <= bs:
                used += sum(cnt[r:r + part])
            else:
                used += sum(cnt[r:]) + sum(cnt[:r + part - bs])
        self.free -= used
        frontend = self.frontend
        fe = now + frontend
        # step x of the run ends at fe + x*a + c2*x*(x-1) (materialised later by _flush, same operations)
        self.segs.extend((fe, a, c2, k))
        self.nd = jk = j + k
        k1 = k - 1
        last = fe + k * a + c2 * k * k1
        self.now = last - frontend
        self.last_start = now + k1 * a + c2 * k1 * (k - 2)  # the run's last step
        self.sum_l = sum_l + n * k
        self.sum_rem -= n * k
        self.steps += k
        heap = self.heap
        if heap and heap[0][0] <= jk:
            self._pop_finished(last)

    def _decode_run_clocked(self, k: int, t_stop: float) -> None:
        """`_decode_run` with the heat term on: the same k decode-only steps (or up to the one that ends at or past
        t_stop), one at a time with the arithmetic of a scheduled step (the vLLM scheduler's general step: cost at
        the current clock, then the clock's update), without its scheduling work; records equal step by step."""
        n = self.n_dec
        graph = n <= self.graph_max
        cost, frontend, cnt, bs, segs = self.cost, self.frontend, self.cnt, self.bs, self.segs
        j = self.nd
        x = 0
        t_out = self.now + frontend
        while x < k:
            ctx = float(self.sum_l + n)
            m = self._flop_mult(self.now)
            dur = cost.step(n, n, ctx, ctx, graph, m)
            self._heat_add(dur, cost.flop_time(n, n, ctx) * m / dur)
            self.free -= cnt[(j + x) % bs]
            now = self.now
            self.last_start = now
            self.now = now = now + dur
            t_out = now + frontend
            segs.extend((t_out, 0.0, 0.0, 1))
            self.sum_l += n
            self.sum_rem -= n
            self.steps += 1
            x += 1
            if now >= t_stop:
                break
        self.nd = j + x
        heap = self.heap
        if heap and heap[0][0] <= j + x:
            self._pop_finished(t_out)

    def _decode_cost(self) -> float:
        n = self.n_dec
        cost = self.cost.for_n(n)
        return cost.decode_base(n, n <= self.graph_max) + cost.dec_b_at(n) * (self.sum_l + n)

    def generated(self, s: Seq) -> int:
        """Tokens produced so far (for the server face)."""
        if s.state == DECODE:
            return s.g0 + self.nd - s.dec_start
        return s.gen

    def _push_steps(self, t_out: float, m: int) -> None:
        """m decode steps (or one step of m tokens) that all end at t_out."""
        self.segs.extend((t_out, 0.0, 0.0, m))
        self.nd += m

    def _flush(self) -> None:
        """Turn the pending decode segments into end times: one numpy pass over all of them, kept as
        raw doubles (array('d')), so no Python float object is made per token."""
        segs = self.segs
        if not segs:
            return
        if len(segs) == 4 and segs[3] == 1:
            self.dec_times.append(segs[0])
        else:
            arr = np.fromiter(segs, dtype=np.float64, count=len(segs)).reshape(-1, 4)
            ks = arr[:, 3].astype(np.int64)
            ends = ks.cumsum()
            # x = 1..k within each run
            x = np.arange(1, int(ends[-1]) + 1, dtype=np.float64)
            x -= (ends - ks).astype(np.float64).repeat(ks)
            # fe + x*a + c2*x*(x-1), evaluated as (fe + x*a) + ((c2*x) * (x-1)) like the scalar formula, in place;
            # a single step (a = c2 = 0) gives fe + 0.0 + 0.0 = fe exactly
            vals = arr[:, 0].repeat(ks)
            t = arr[:, 1].repeat(ks)
            t *= x
            vals += t
            t = arr[:, 2].repeat(ks)
            t *= x
            x -= 1.0
            t *= x
            vals += t
            self.dec_times.frombytes(vals.data.cast("B"))  # raw bytes of the doubles, no float objects
        segs.clear()

    def token_times(self, s: Seq) -> array[float]:
        """A sequence's token times so far (array('d'): the records carry them so, see RequestRecord)."""
        if self.segs:
            self._flush()
        dec = self.dec_times
        pieces = s.pieces
        if len(pieces) == 1 and s.state != DECODE and s.first is not None:
            p0 = pieces[0]
            if type(p0) is tuple and p0[0] > 0:  # the common case: one prefill, one decode stretch, done
                run = dec[p0[0] - 1:p0[1]]
                run[0] = s.first
                return run
        out = array("d") if s.first is None else array("d", (s.first,))
        for p in pieces:
            if type(p) is tuple:
                out += dec[p[0]:p[1]]
            else:
                out.append(p)  # type: ignore[arg-type]
        if s.state == DECODE:
            out += dec[s.dec_start:]
        return out

    def abort(self, s: Seq) -> None:
        """Drop a request (client went away): free its KV, never finish it."""
        if s.state == WAITING:
            if s in self.waiting:
                self.waiting.remove(s)
        elif s.state != DONE:
            self._release(s)
        s.state = DONE

    def kv_usage(self) -> float:
        return 1.0 - self.free / self.total_blocks if self.total_blocks else 0.0


def _steps_to_reach(a: float, c2: float, span: float) -> int:
    """Smallest x >= 1 with x*a + c2*x*(x-1) >= span (decode steps until a time is passed)."""
    if span <= 0:
        return 1
    if c2 <= 0:
        return max(1, math.ceil(span / a))
    b = a - c2
    x = math.ceil((-b + math.sqrt(b * b + 4.0 * c2 * span)) / (2.0 * c2))
    x = max(1, x)
    while x > 1 and (x - 1) * a + c2 * (x - 1) * (x - 2) >= span:
        x -= 1
    while x * a + c2 * x * (x - 1) < span:
        x += 1
    return x
