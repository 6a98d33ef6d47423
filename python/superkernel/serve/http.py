"""The OpenAI-compatible HTTP API of ``superkernel serve`` (FastAPI, served by uvicorn).

    GET  /v1/models             the one model this server runs
    POST /v1/completions        prompt (text, or a list of token ids) -> text
    POST /v1/chat/completions   messages, rendered by the checkpoint's chat template -> a message
    GET  /health                200 while the engine runs, 503 once it failed
    GET  /metrics               Prometheus text: queue depth, running sequences, tokens, TTFT and
                                inter-token latency histograms, KV blocks in use

Both POST routes take ``stream: true`` (server-sent events, ``data: [DONE]`` last), ``max_tokens``
(chat: also ``max_completion_tokens``), ``temperature`` (default 1), ``top_p``, ``top_k``,
``seed``, ``stop`` (a string or up to 4), ``n`` (1 only), ``logprobs`` (completions: an integer
0-20 of alternatives per token; chat: a bool, with ``top_logprobs``), ``stream_options``
(``include_usage``), ``user``; ``frequency_penalty`` and ``presence_penalty`` only as 0. A field
outside that list, a wrong type or an out-of-range value is a 400 naming the field (never
ignored); malformed JSON is a 400; more waiting requests than ``max_waiting`` is a 503 with
Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from .engine import DoneEvent, Engine, Overloaded, SamplingParams, TokenEvent
from .text import TextStream, render_chat

COMMON = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n", "stream", "logprobs",
          "stream_options", "user", "frequency_penalty", "presence_penalty", "ignore_eos"}
COMPLETION_FIELDS = COMMON | {"prompt", "echo"}
CHAT_FIELDS = COMMON | {"messages", "max_completion_tokens", "top_logprobs"}


class BadRequest(Exception):
    pass


def _number(body: dict, key: str, default, lo=None, hi=None, integer=False):
    v = body.get(key, default)
    if v is None:
        return default
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok:
        raise BadRequest(f"'{key}': expected {'an integer' if integer else 'a number'}, got {json.dumps(v)}")
    if isinstance(v, float) and not math.isfinite(v):  # json.loads reads NaN and Infinity
        raise BadRequest(f"'{key}': expected a finite number, got {v}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadRequest(f"'{key}': {v} is outside [{lo}, {hi}]")
    return v


def _flag(body: dict, key: str, default=False) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise BadRequest(f"'{key}': expected true or false, got {json.dumps(v)}")
    return v


class Server:
    """The routes over one engine, tokenizer and model name (see the module docstring)."""

    def __init__(self, engine: Engine, tokenizer, model_name: str, eos_ids: set[int], default_max_tokens: int = 16):
        self.engine, self.tokenizer, self.model_name = engine, tokenizer, model_name
        self.eos_ids, self.default_max_tokens = frozenset(eos_ids), default_max_tokens
        self.created = int(time.time())

    # ---- request parsing ----

    def _check_fields(self, body, allowed: set, route: str) -> None:
        if not isinstance(body, dict):
            raise BadRequest(f"{route}: the body must be a JSON object")
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise BadRequest(f"{route}: unknown field{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(k) for k in unknown)} (this server implements: "
                             f"{', '.join(sorted(allowed))})")
        model = body.get("model")
        if model is not None and model != self.model_name:
            raise BadRequest(f"'model': this server runs '{self.model_name}', not {json.dumps(model)}")
        if _number(body, "n", 1, integer=True) != 1:
            raise BadRequest("'n': only 1 is implemented")
        for key in ("frequency_penalty", "presence_penalty"):
            if _number(body, key, 0) != 0:
                raise BadRequest(f"'{key}': not implemented (only 0)")
        opts = body.get("stream_options")
        if opts is not None and (not isinstance(opts, dict) or set(opts) - {"include_usage"}):
            raise BadRequest("'stream_options': expected {\"include_usage\": true|false}")
        if opts is not None and not _flag(body, "stream"):
            raise BadRequest("'stream_options': only with 'stream': true")
        if body.get("user") is not None and not isinstance(body["user"], str):
            raise BadRequest("'user': expected a string")

    def _stop(self, body) -> list[str]:
        stop = body.get("stop")
        if stop is None:
            return []
        if isinstance(stop, str):
            return [stop]
        if isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop):
            return stop
        raise BadRequest("'stop': expected a string or a list of up to 4 strings")

    def _params(self, body, max_key_value, logprobs: bool, top: int) -> SamplingParams:
        if _number(body, "top_p", 1.0, 0, 1) == 0:  # the sampler keeps a nucleus of mass > 0
            raise BadRequest("'top_p': 0 keeps no token; expected a value in (0, 1] (temperature 0 is greedy)")
        return SamplingParams(
            max_tokens=max_key_value, temperature=float(_number(body, "temperature", 1.0, 0, 2)),
            top_p=float(_number(body, "top_p", 1.0, 0, 1)), top_k=_number(body, "top_k", 0, 0, None, integer=True),
            seed=_number(body, "seed", 0, 0, 2**63 - 1, integer=True),
            stop_ids=frozenset() if _flag(body, "ignore_eos") else self.eos_ids,
            want_logprobs=logprobs, logprobs=top)

    def parse_completion(self, body) -> tuple[list[int], SamplingParams, list[str]]:
        self._check_fields(body, COMPLETION_FIELDS, "/v1/completions")
        if _flag(body, "echo"):
            raise BadRequest("'echo': not implemented (only false)")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            if not prompt:
                raise BadRequest("'prompt': empty")
            ids = list(self.tokenizer(prompt)["input_ids"])
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                         for t in prompt):
            ids = prompt
        else:
            raise BadRequest("'prompt': expected a string or a list of token ids (one prompt: 'n' and batches "
                             "of prompts are not implemented)")
        top = body.get("logprobs")
        top = 0 if top is None else _number(body, "logprobs", 0, 0, 20, integer=True)
        max_tokens = _number(body, "max_tokens", self.default_max_tokens, 1, None, integer=True)
        return ids, self._params(body, max_tokens, body.get("logprobs") is not None, top), self._stop(body)

    def parse_chat(self, body) -> tuple[list[int], SamplingParams, list[str]]:
        self._check_fields(body, CHAT_FIELDS, "/v1/chat/completions")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages': expected a non-empty list of {\"role\", \"content\"} objects")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise BadRequest(f"'messages[{i}]': expected an object with string 'role' and 'content'")
            extra = set(m) - {"role", "content", "name"}
            if extra:
                raise BadRequest(f"'messages[{i}]': unknown field {sorted(extra)[0]!r}")
        if not getattr(self.tokenizer, "chat_template", None):
            raise BadRequest("/v1/chat/completions: the checkpoint's tokenizer has no chat template "
                             "(tokenizer_config.json 'chat_template'); use /v1/completions")
        try:
            ids = render_chat(self.tokenizer, messages)
        except Exception as e:  # noqa: BLE001 - a template is a program: its error is the request's
            raise BadRequest(f"'messages': the chat template does not render them: {type(e).__name__}: {e}") from None
        want = _flag(body, "logprobs")
        top = _number(body, "top_logprobs", 0, 0, 20, integer=True)
        if top and not want:
            raise BadRequest("'top_logprobs': needs 'logprobs': true")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        max_tokens = _number({key: max_tokens}, key, self.default_max_tokens, 1, None, integer=True)
        return ids, self._params(body, max_tokens, want, top), self._stop(body)

    # ---- running one request ----

    def start(self, ids, params, loop) -> tuple:
        queue: asyncio.Queue = asyncio.Queue()
        req = self.engine.submit(ids, params, lambda ev: loop.call_soon_threadsafe(queue.put_nowait, ev))
        return req, queue

    async def events(self, req, queue, stop: list[str], disconnected=None):
        """(text, the TokenEvents it came from, finish reason or None), one token at a time (one SSE
        frame each: sending the tokens already queued as one frame gave the same requests/s on
        2 cores, 53 against 54.5 at concurrency 16, and coarser inter-token times). `disconnected`:
        an async callable polled while no token arrives (every 0.25 s): true ends the request (a
        write to a closed connection fails too, but only when a token is due)."""
        text = TextStream(self.tokenizer, stop)
        getter = None  # one pending get, kept across the polls (cancelling it could lose a token)
        try:
            while True:
                waiting = []
                if getter is not None or queue.empty():
                    getter = getter or asyncio.ensure_future(queue.get())
                    done, _ = await asyncio.wait({getter}, timeout=0.25)
                    if not done:
                        if disconnected is not None and await disconnected():
                            self.engine.abort(req)
                            return
                        continue
                    waiting.append(getter.result())
                    getter = None
                else:
                    waiting.append(queue.get_nowait())
                pieces, evs = [], []
                for ev in waiting:
                    if isinstance(ev, DoneEvent):
                        if ev.reason == "error":
                            raise RuntimeError(ev.message)
                        pieces.append(text.flush())
                        yield "".join(pieces), evs, "stop" if ev.reason == "stop" else "length"
                        return
                    piece, stopped = text.push(ev.token)
                    pieces.append(piece)
                    evs.append(ev)
                    if stopped:
                        self.engine.abort(req)
                        yield "".join(pieces), evs, "stop"
                        return
                yield "".join(pieces), evs, None
        finally:
            if getter is not None:
                getter.cancel()

    def token_text(self, token: int) -> str:
        return self.tokenizer.decode([token], skip_special_tokens=False)

    def usage(self, req) -> dict:
        n = len(req.output)
        return {"prompt_tokens": len(req.prompt), "completion_tokens": n, "total_tokens": len(req.prompt) + n}

    def metrics(self) -> str:
        s = self.engine.stats()
        lines = []

        def metric(name, kind, help_, value):
            lines.extend([f"# HELP superkernel_{name} {help_}", f"# TYPE superkernel_{name} {kind}",
                          f"superkernel_{name} {value}"])

        metric("requests_waiting", "gauge", "Requests queued for a sequence row.", s["waiting"])
        metric("requests_running", "gauge", "Sequences in a row (prefilling or decoding).", s["running"])
        metric("kv_blocks_used", "gauge", "KV cache blocks holding tokens of running sequences.", s["kv_blocks_used"])
        metric("kv_blocks_total", "gauge", "KV cache blocks of all rows.", s["kv_blocks_total"])
        metric("generation_tokens_total", "counter", "Tokens sampled.", s["tokens_generated"])
        metric("prompt_tokens_total", "counter", "Prompt tokens prefilled.", s["prompt_tokens"])
        lines += ["# HELP superkernel_requests_finished_total Requests finished, by reason (stop, length, abort, "
                  "error).", "# TYPE superkernel_requests_finished_total counter"]
        for reason in ("stop", "length", "abort", "error"):
            lines.append(f'superkernel_requests_finished_total{{reason="{reason}"}} '
                         f'{s["finished_by_reason"].get(reason, 0)}')
        metric("engine_steps_total", "counter", "Scheduler iterations.", s["steps"])
        rate = s["tokens_generated"] / s["uptime_s"] if s["uptime_s"] > 0 else 0.0
        metric("generation_tokens_per_second", "gauge", "Tokens sampled per second since start.", f"{rate:.3f}")
        for name, h, help_ in (("time_to_first_token_seconds", s["ttft"], "Arrival to first token."),
                               ("inter_token_latency_seconds", s["itl"], "Between a request's tokens."),
                               ("prefill_launch_seconds", s["prefill_time"], "Each prefill launch of the model."),
                               ("decode_launch_seconds", s["decode_time"], "Each decode launch of the model.")):
            lines += [f"# HELP superkernel_{name} {help_}", f"# TYPE superkernel_{name} histogram"]
            for b, c in zip(h.buckets, h.counts):
                lines.append(f'superkernel_{name}_bucket{{le="{b}"}} {c}')
            lines += [f'superkernel_{name}_bucket{{le="+Inf"}} {h.count}', f"superkernel_{name}_sum {h.sum:.6f}",
                      f"superkernel_{name}_count {h.count}"]
        return "\n".join(lines) + "\n"


def create_app(server: Server) -> FastAPI:
    app = FastAPI(title="superkernel", docs_url=None, redoc_url=None)

    def error(status: int, message: str, kind: str = "invalid_request_error", headers=None):
        return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status,
                            headers=headers)

    async def body_of(request: Request):
        raw = await request.body()
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"the body is not JSON: {e}") from None
        except RecursionError:  # a RuntimeError: it would read as the engine's failure
            raise BadRequest("the body is not JSON this server reads: nested too deeply") from None

    @app.get("/health")
    async def health():
        if server.engine.failure is not None:
            return error(503, f"the engine stopped: {server.engine.failure}", "server_error")
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(server.metrics(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": server.model_name, "object": "model", "created": server.created,
                                            "owned_by": "superkernel"}]}

    async def run(request: Request, chat: bool):
        try:
            body = await body_of(request)
            ids, params, stop = server.parse_chat(body) if chat else server.parse_completion(body)
            stream = _flag(body, "stream")
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            req, queue = server.start(ids, params, asyncio.get_running_loop())
        except BadRequest as e:
            return error(400, str(e))
        except Overloaded as e:
            return error(503, f"overloaded: {e}; retry later", "server_error", {"Retry-After": "1"})
        except RuntimeError as e:
            return error(503, str(e), "server_error")
        except ValueError as e:  # the engine's checks (InvalidArgumentError): prompt length, ids
            return error(400, str(e))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        kind = "chat.completion" if chat else "text_completion"
        created = int(time.time())

        def logprob_entry(ev: TokenEvent):
            if chat:
                return {"token": server.token_text(ev.token), "logprob": ev.logprob,
                        "top_logprobs": [{"token": server.token_text(t), "logprob": v} for t, v in ev.top]}
            return ev

        def choice(piece, evs, finish, delta: bool):
            c = {"index": 0, "finish_reason": finish}
            if chat:
                c["delta" if delta else "message"] = {"role": "assistant", "content": piece} if not delta or piece \
                    else {}
            else:
                c["text"] = piece
            if params.want_logprobs:
                entries = [logprob_entry(e) for e in evs]
                if chat:
                    c["logprobs"] = {"content": entries}
                else:
                    c["logprobs"] = {"tokens": [server.token_text(e.token) for e in evs],
                                     "token_logprobs": [e.logprob for e in evs],
                                     "top_logprobs": [{server.token_text(t): v for t, v in e.top} for e in evs]}
            else:
                c["logprobs"] = None
            return c

        if not stream:
            pieces, evs, finish = [], [], "length"
            try:
                async for piece, batch, reason in server.events(req, queue, stop, request.is_disconnected):
                    pieces.append(piece)
                    evs.extend(batch)
                    if reason:
                        finish = reason
            except RuntimeError as e:
                return error(500, str(e), "server_error")
            finally:
                server.engine.abort(req)
            return {"id": rid, "object": kind, "created": created, "model": server.model_name,
                    "choices": [choice("".join(pieces), evs, finish, False)], "usage": server.usage(req)}

        async def sse():
            chunk_kind = "chat.completion.chunk" if chat else "text_completion"

            def frame(choices, usage=None):
                d = {"id": rid, "object": chunk_kind, "created": created, "model": server.model_name,
                     "choices": choices}
                if usage is not None:
                    d["usage"] = usage
                return f"data: {json.dumps(d)}\n\n"
            try:
                if chat:
                    yield frame([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
                                  "logprobs": None}])
                async for piece, batch, reason in server.events(req, queue, stop, request.is_disconnected):
                    if piece or batch or reason:
                        c = choice(piece, batch, reason, True)
                        if chat and not piece:
                            c["delta"] = {}
                        yield frame([c])
                if include_usage:
                    yield frame([], server.usage(req))
                yield "data: [DONE]\n\n"
            except RuntimeError as e:
                yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'server_error'}})}\n\n"
            finally:
                server.engine.abort(req)  # a client that went away frees its row

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await run(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await run(request, chat=True)

    return app
