"""Continuous batching over a model's paged KV cache: the scheduler behind ``superkernel serve``.

The steps are a PyTorch model's (``TorchSteps``: the LongCat-Flash sample compiled with the
superkernel backend) or a C++ model library architecture's (``CppModel``: Llama, LongCat-Flash,
the graphs ``superkernel run`` runs): ``decode`` over up to ``rows`` sequence rows,
``prefill`` over ``chunk`` packed prompt tokens. Each iteration of the engine's thread

1. admits waiting requests into free sequence rows (first come, first served; a request waits
   while every row is busy),
2. runs one prefill chunk: up to ``prefill_tokens`` prompt tokens of the admitted requests, in
   arrival order, a long prompt split over several iterations, so that it never stalls the
   streams already decoding; a request whose prompt is complete samples its first token from the
   chunk's logits,
3. runs one decode step (one launch: the captured step replayed in compiled modes) for every
   sequence that is decoding, packed into the first rows of a launch of the next power-of-two
   rows (each size compiled once; the block tables say whose cache each row reads), the rest
   padding (their token written nowhere, slot -1),

then hands every new token to its request. A row's results depend on its own tokens only (the
kernels' numerics do not depend on the batch rows or on the tokens beside it in a chunk), so a
request gets the same tokens alone or batched with others; tests/python/test_serve.py checks it.

    engine = Engine(TorchSteps(model, compile_options("superkernel")))   # or Engine(CppModel(...))
    engine.start()
    req = engine.submit([1, 2, 3], SamplingParams(max_tokens=8, temperature=0.0), on_event=print)

Cache layout: row b owns cache blocks j * batch + b (the C++ models' PagedCacheLayout), so a
request holds ceil(length / block_size) blocks and never more than max_context tokens; one that
would not fit is refused when it is submitted.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .._errors import InvalidArgumentError
from .._sampling import Sampler

# Latency histogram buckets (seconds), for /metrics.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class SamplingParams:
    """What a request asks of the sampler. temperature 0 is greedy (argmax); top_k 0 and top_p 1
    are off; ``seed`` keys the library's counter-based sampler (sample.f32), so a seeded request
    draws the same tokens alone or batched. ``logprobs``: how many top alternatives to report per
    token (0: none, only the chosen token's log-probability when ``want_logprobs``)."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    stop_ids: frozenset = frozenset()
    want_logprobs: bool = False
    logprobs: int = 0


@dataclass
class TokenEvent:
    token: int
    logprob: float | None = None
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class DoneEvent:
    reason: str  # "stop" (an EOS / stop id), "length" (max_tokens or the context), "abort", "error"
    message: str = ""


class Request:
    """One sequence: its prompt, sampling, state and timings. Events reach ``on_event`` from the
    engine's thread, in order: one TokenEvent per new token, then one DoneEvent."""

    def __init__(self, rid: int, prompt: list[int], params: SamplingParams, on_event: Callable):
        self.id, self.prompt, self.params, self.on_event = rid, prompt, params, on_event
        self.sampler = Sampler(params.temperature, params.top_k, params.top_p, params.seed)
        self.row = -1
        self.written = 0  # prompt tokens already in the cache
        self.length = 0  # tokens in the cache
        self.output: list[int] = []
        self.pending: int | None = None  # the last sampled token, not yet fed to decode
        self.done: DoneEvent | None = None
        self.aborted = False
        self.arrival = time.perf_counter()
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None


class Histogram:
    def __init__(self, buckets=LATENCY_BUCKETS):
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, v: float) -> None:
        self.sum += v
        self.count += 1
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1


class Engine:
    """Continuous batching over a model's paged steps (see the module docstring): ``steps`` is a
    ``TorchSteps`` (a PyTorch model compiled with the superkernel backend) or a
    ``superkernel.models.cpp_model.CppModel`` (a C++ model library architecture). Requests queued
    beyond ``max_waiting`` are refused (``submit`` raises Overloaded)."""

    def __init__(self, steps, *, max_waiting: int = 64):
        self.stepper = steps
        self.rows, self.block_size, self.max_context = steps.rows, steps.block_size, steps.max_context
        self.chunk = steps.chunk
        self.vocab_size = steps.vocab_size
        self.max_blocks = -(-self.max_context // self.block_size)
        self._tables = steps.block_tables_for(range(self.rows))
        self.max_waiting = max_waiting
        self._greedy = Sampler(0.0, 0, 1.0, 0)  # the sample kernel's argmax, over several rows
        self._lock = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._slots: list[Request | None] = [None] * self.rows
        self._next_id = 0
        self._thread: threading.Thread | None = None
        self._stop = False
        self.failure: BaseException | None = None
        # Metrics.
        self.tokens_generated = 0
        self.prompt_tokens = 0
        self.requests_finished = 0
        self.finished_by_reason: dict[str, int] = {}
        self.steps = 0
        self.ttft = Histogram()
        self.itl = Histogram()
        self.prefill_time = Histogram()  # each prefill launch, as the model ran it
        self.decode_time = Histogram()  # each decode launch
        self._started_at = time.perf_counter()

    # ---- the caller's side (any thread) ----

    def submit(self, prompt: list[int], params: SamplingParams, on_event: Callable) -> Request:
        vocab = self.vocab_size
        if not prompt:
            raise InvalidArgumentError("the prompt has no tokens")
        if any(not 0 <= t < vocab for t in prompt):
            bad = next(t for t in prompt if not 0 <= t < vocab)
            raise InvalidArgumentError(f"prompt token id {bad} is outside the vocabulary ({vocab} ids)")
        if len(prompt) >= self.max_context:
            raise InvalidArgumentError(f"the prompt has {len(prompt)} tokens; this server's context is "
                                       f"{self.max_context} tokens (prompt and completion together)")
        if params.max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be at least 1, got {params.max_tokens}")
        if len(prompt) + params.max_tokens > self.max_context:
            raise InvalidArgumentError(
                f"the prompt's {len(prompt)} tokens and max_tokens {params.max_tokens} exceed this server's context "
                f"of {self.max_context} tokens (prompt and completion together); ask for at most "
                f"{self.max_context - len(prompt)}")
        with self._lock:
            if self.failure is not None:
                raise RuntimeError(f"the engine stopped: {self.failure}")
            if len(self._waiting) >= self.max_waiting:
                raise Overloaded(f"{len(self._waiting)} requests are waiting (max_waiting {self.max_waiting})")
            req = Request(self._next_id, list(prompt), params, on_event)
            self._next_id += 1
            self._waiting.append(req)
            self._lock.notify_all()
        return req

    def abort(self, req: Request) -> None:
        """Stops a request (a client that went away); its row is freed at the next iteration."""
        with self._lock:
            req.aborted = True
            self._lock.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="superkernel-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()

    def stats(self) -> dict:
        with self._lock:
            running = [r for r in self._slots if r is not None]
            blocks = sum(-(-r.length // self.block_size) for r in running)
            return {"waiting": len(self._waiting), "running": len(running), "kv_blocks_used": blocks,
                    "kv_blocks_total": self.rows * self.max_blocks, "tokens_generated": self.tokens_generated,
                    "prompt_tokens": self.prompt_tokens, "requests_finished": self.requests_finished,
                    "finished_by_reason": dict(self.finished_by_reason),
                    "steps": self.steps, "uptime_s": time.perf_counter() - self._started_at,
                    "ttft": self.ttft, "itl": self.itl, "prefill_time": self.prefill_time,
                    "decode_time": self.decode_time}

    # ---- the engine's thread ----

    def _loop(self) -> None:
        try:
            while True:
                with self._lock:
                    while not self._stop and not self._waiting and not any(self._slots):
                        self._lock.wait()
                    if self._stop:
                        break
                    self._admit()
                self.iterate()
        except BaseException as e:  # noqa: BLE001 - every request learns why; nothing hangs
            with self._lock:
                self.failure = e
                for r in list(self._waiting) + [r for r in self._slots if r is not None]:
                    self._finish(r, DoneEvent("error", f"{type(e).__name__}: {e}"))
                self._waiting.clear()

    def _admit(self) -> None:
        for r in list(self._waiting):
            if r.aborted:
                self._waiting.remove(r)
                self._finish(r, DoneEvent("abort"))
        for b in range(self.rows):
            if self._slots[b] is None and self._waiting:
                r = self._waiting.popleft()
                r.row = b
                self._slots[b] = r

    def step(self) -> None:
        """Admits waiting requests and runs one iteration, on the caller's thread (a command
        line's single request; the server's thread does the same in its loop)."""
        with self._lock:
            self._admit()
        self.iterate()

    def iterate(self) -> None:
        """One scheduler iteration: a prefill chunk, then one decode step (see the module doc)."""
        with self._lock:
            for b, r in enumerate(self._slots):
                if r is not None and r.aborted:
                    self._finish(r, DoneEvent("abort"))
            active = [r for r in self._slots if r is not None]
        filling = sorted((r for r in active if r.written < len(r.prompt)), key=lambda r: r.id)
        if filling:
            self._prefill_chunk(filling)
        decoding = [r for r in active if r.done is None and r.pending is not None]
        if decoding:
            self._decode_step(decoding)
        self.steps += 1

    def _slot(self, row: int, position: int) -> int:
        return self._tables[row][position // self.block_size] * self.block_size + position % self.block_size

    def _prefill_chunk(self, filling: list[Request]) -> None:
        ids, pos, slots, seq, last = [], [], [], [], {}
        for r in filling:
            take = min(len(r.prompt) - r.written, self.chunk - len(ids))
            if take <= 0:
                break
            for i in range(r.written, r.written + take):
                ids.append(r.prompt[i])
                pos.append(i)
                slots.append(self._slot(r.row, i))
                seq.append(r.row)
            r.written += take
            r.length = r.written
            if r.written == len(r.prompt):
                last[r] = len(ids) - 1
        rows = list(last.values())
        t0 = time.perf_counter()
        logits = self.stepper.prefill(ids, pos, slots, seq, rows)
        self.prefill_time.observe(time.perf_counter() - t0)
        self.prompt_tokens += len(ids)
        for i, r in enumerate(last):
            self._sample(r, logits[i:i + 1])

    def bucket(self, n: int) -> int:
        """Rows of the decode launch for n decoding sequences: the next power of two (at most the
        engine's rows), so a lightly loaded server does not pay for its idle rows."""
        b = 1
        while b < n:
            b *= 2
        return min(b, self.rows)

    def _decode_step(self, decoding: list[Request]) -> None:
        rows = self.bucket(len(decoding))
        ids, pos, slots, lens = [0] * rows, [0] * rows, [-1] * rows, [1] * rows
        tables = [self._tables[0]] * rows  # padding rows: written nowhere, read one slot
        for i, r in enumerate(decoding):
            ids[i], pos[i], slots[i], tables[i] = r.pending, r.length, self._slot(r.row, r.length), self._tables[r.row]
            r.length += 1
            lens[i] = r.length
            r.pending = None
        t0 = time.perf_counter()
        logits = self._run_decode(ids, pos, slots, tables, lens)
        self.decode_time.observe(time.perf_counter() - t0)
        # Greedy rows take one argmax call for all of them (temperature 0 reads neither the seed
        # nor the row, so it is each row's own draw); the others draw one by one, row 0 of a call
        # keyed by their own seed and step, as they would alone.
        greedy = [i for i, r in enumerate(decoding) if r.params.temperature == 0 and not r.params.want_logprobs]
        chosen = dict(zip(greedy, self._greedy(logits[:len(decoding)][greedy]))) if greedy else {}
        for i, r in enumerate(decoding):
            self._sample(r, logits[i:i + 1], chosen.get(i))

    def warm_up(self) -> None:
        """Compiles (and captures) the prefill and every decode launch size before the first
        request, on padding only: nothing is written to the caches."""
        for size, seqs in getattr(self.stepper, "prefill_shapes", lambda: [(self.chunk, 1)])():
            seq = [i % seqs for i in range(size)]  # `seqs` sequences: that graph, padding only
            self.stepper.prefill([0] * size, [0] * size, [-1] * size, seq, [0])
        rows = 1
        while True:
            self._run_decode([0] * rows, [0] * rows, [-1] * rows, [self._tables[0]] * rows, [1] * rows)
            if rows >= self.rows:
                break
            rows = self.bucket(rows + 1)
        self.prefill_time, self.decode_time = Histogram(), Histogram()  # the requests' launches only

    def _run_decode(self, ids, pos, slots, tables, lens) -> torch.Tensor:
        return self.stepper.decode(ids, pos, slots, tables, lens)

    def _sample(self, r: Request, logits: torch.Tensor, token: int | None = None) -> None:
        p = r.params
        if token is None:
            token = r.sampler(logits)[0]
        else:
            r.sampler.advance()
        event = TokenEvent(token)
        if p.want_logprobs:
            lp = torch.log_softmax(logits[0].double(), -1)
            event.logprob = float(lp[token])
            if p.logprobs:
                values, indices = torch.topk(lp, min(p.logprobs, lp.numel()))
                event.top = [(int(i), float(v)) for v, i in zip(values, indices)]
        now = time.perf_counter()
        if r.first_token_at is None:
            r.first_token_at = now
            self.ttft.observe(now - r.arrival)
        else:
            self.itl.observe(now - r.last_token_at)
        r.last_token_at = now
        self.tokens_generated += 1
        if token in p.stop_ids:
            self._finish(r, DoneEvent("stop"))
            return
        r.output.append(token)
        r.on_event(event)
        # Prompt and completion together hold at most max_context tokens (the last one sampled is
        # never written to the cache, so the cache keeps room to spare for one).
        if len(r.output) >= p.max_tokens or r.length + 1 >= self.max_context:
            self._finish(r, DoneEvent("length"))
            return
        r.pending = token

    def _finish(self, r: Request, event: DoneEvent) -> None:
        with self._lock:  # re-entrant: also called with the lock held
            if r.done is not None:
                return
            r.done = event
            if 0 <= r.row < self.rows and self._slots[r.row] is r:
                self._slots[r.row] = None
            self.requests_finished += 1
            self.finished_by_reason[event.reason] = self.finished_by_reason.get(event.reason, 0) + 1
        r.on_event(event)


class TorchSteps:
    """The paged steps of a PyTorch model (the LongCat-Flash sample's interface:
    ``decode(input_ids, positions, slot_mapping, block_tables, context_lens)`` and
    ``prefill(input_ids, positions, slot_mapping, block_tables, seq_ids)`` over ``options.batch``
    cache rows), compiled with torch.compile(backend="superkernel") under ``options``
    (``compile_options(mode)``), or plain torch with None. ``replay``: a compiled decode step of
    each launch size is captured once and replayed."""

    def __init__(self, model, options: dict | None = None, *, replay: bool = True):
        from ..models.longcat_flash import compile_step

        o = model.options
        self.model = model
        self.rows, self.block_size, self.chunk = o.batch, o.block_size, o.prefill_tokens
        self.max_blocks = -(-o.max_context // o.block_size)
        self.max_context = o.max_context
        self.vocab_size = model.config.vocab_size
        self.block_tables = torch.tensor(self.block_tables_for(range(self.rows)), dtype=torch.int32)
        if options is None:
            self._decode, self._prefill, self.replay = model.decode, model.prefill, False
        else:
            self._decode = compile_step(model.decode, options)
            self._prefill = compile_step(model.prefill, options)
            self.replay = replay
        self._captured: dict = {}  # decode rows -> the captured step
        self._views: dict = {}

    def block_tables_for(self, rows) -> list[list[int]]:
        """Row b owns cache blocks j * rows + b (the C++ models' PagedCacheLayout)."""
        return [[j * self.rows + b for j in range(self.max_blocks)] for b in rows]

    def prefill(self, ids, pos, slots, seq, want_rows) -> torch.Tensor:
        pad = self.chunk - len(ids)
        ids, pos, slots, seq = ids + [0] * pad, pos + [0] * pad, slots + [-1] * pad, seq + [0] * pad
        i32 = torch.int32
        with torch.inference_mode():
            logits = self._prefill(torch.tensor(ids, dtype=i32), torch.tensor(pos, dtype=i32),
                                   torch.tensor(slots, dtype=i32), self.block_tables, torch.tensor(seq, dtype=i32))
        return logits[list(want_rows)]

    def decode(self, ids, pos, slots, tables, lens) -> torch.Tensor:
        rows = len(ids)
        captured = self._captured.get(rows)
        if captured is not None:
            views = self._views[rows]
            for name, v in (("input_ids", ids), ("positions", pos), ("slot_mapping", slots),
                            ("block_tables", tables), ("context_lens", lens)):
                views[name][...] = v
            return captured()
        i32 = torch.int32
        inputs = (torch.tensor(ids, dtype=i32), torch.tensor(pos, dtype=i32), torch.tensor(slots, dtype=i32),
                  torch.tensor(tables, dtype=i32), torch.tensor(lens, dtype=i32))
        if not self.replay:
            with torch.inference_mode():
                return self._decode(*inputs)
        from .._capture import capture

        static = [t.clone() for t in inputs]  # outside inference mode: later steps write them
        with torch.inference_mode():
            captured = self._captured[rows] = capture(self._decode, *static)
        names = ("input_ids", "positions", "slot_mapping", "block_tables", "context_lens")
        self._views[rows] = {n: t.numpy() for n, t in zip(names, captured.inputs)}
        return captured.result


class Overloaded(RuntimeError):
    """Too many requests are waiting: the server answers 503 with Retry-After."""

