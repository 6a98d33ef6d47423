"""``python -m superkernel serve``: the continuous-batching engine and the OpenAI-compatible HTTP
API, every test on three seeded oracle checkpoints (longcat_oracle) with a word-level tokenizer
(test_longcat_cli.make_tokenizer: id i is the word "w{i}"): LongCat-Flash, served by its PyTorch
sample compiled with the superkernel backend, and Llama and Qwen2-MoE (published per-expert
layout, a shared expert), served by the C++ model library's graphs
(superkernel.models.cpp_model.CppModel).

- engine: a request alone gives transformers' greedy ids in every mode; requests batched with
  others (more requests than sequence rows, prompts longer than a prefill chunk, arriving while
  others decode) give the same tokens as alone, greedy and seeded sampling alike; EOS and
  max_tokens end a request, a prompt longer than the context is refused; DeepSeek-V3 (MLA, grouped
  routing) served alone and batched in superkernel mode.
- HTTP (a real server on a free port, stdlib client): /v1/models, /health, /metrics;
  /v1/completions and /v1/chat/completions, plain and streamed (server-sent events), text equal to
  the greedy ids' words, stop strings, logprobs, usage; concurrent requests each get their alone
  tokens; malformed JSON, unknown fields, n > 1, bad values and overload are errors naming the
  field.
- command line: a checkpoint without a tokenizer is refused at start, naming what is missing."""

import json
import os
import queue
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from superkernel import _cli
from superkernel.models import run_config
from superkernel.serve import DoneEvent, Overloaded, SamplingParams, TokenEvent
from longcat_oracle import Case
from test_longcat_cli import EOS_WORD, make_tokenizer

ROWS, CONTEXT, CHUNK = 3, 64, 8


def _checkpoint(tmp_path_factory, oracle_case):
    """A copy of an oracle checkpoint with a tokenizer and a run config beside it."""
    d = tmp_path_factory.mktemp("serve_ckpt")
    case = Case(oracle_case)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(case.dir, name), d / name)
    make_tokenizer(str(d), 96)
    cfg = d / "run.yaml"
    cfg.write_text(f"model_config:\n  exe_mode: superkernel\n  custom_params:\n    enable_superkernel: true\n"
                   f"model:\n  checkpoint: {d}\n")
    return case, str(cfg)


# The engine, text and HTTP tests run on each architecture the server builds differently: LongCat-Flash
# (the PyTorch path), Llama and Qwen2-MoE (the C++ models).
@pytest.fixture(scope="module", params=["longcat_packed", "llama_rope_theta", "qwen2_moe_per_expert"],
                ids=["longcat", "llama", "qwen2_moe"])
def checkpoint(tmp_path_factory, request):
    return _checkpoint(tmp_path_factory, request.param)


# The process-level tests (a `serve` subprocess: start, answer, SIGTERM) do not depend on the model:
# one architecture, the C++ Llama (the quickest to start).
@pytest.fixture(scope="module")
def llama_checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory, "llama_rope_theta")


def _engine(cfg_path, mode="superkernel", rows=ROWS, **flags):
    argv = ["serve", cfg_path, "--mode", mode, "--max-sequences", str(rows), "--max-context", str(CONTEXT),
            "--prefill-chunk", str(CHUNK), "-q"]
    for k, v in flags.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    args = _cli.parser().parse_args(argv)
    return _cli.serve_engine(args, run_config.load(cfg_path))


_drained_engines = {}


def _drained_engine(cfg_path, mode="superkernel"):
    """An engine shared by the tests that drain every request they submit and change no setting
    (building one compiles its graphs: seconds for LongCat-Flash)."""
    if (cfg_path, mode) not in _drained_engines:
        _drained_engines[(cfg_path, mode)] = _engine(cfg_path, mode)
    return _drained_engines[(cfg_path, mode)]


def _drain(engine, prompts, params):
    """Submits every prompt, runs the engine's iterations on this thread until all are done;
    returns per request (tokens, finish reason)."""
    queues = []
    for p in prompts:
        q = queue.Queue()
        engine.submit(p, params, q.put)
        queues.append(q)
    while engine._waiting or any(r is not None for r in engine._slots):
        engine._admit()
        engine.iterate()
    out = []
    for q in queues:
        events = [q.get() for _ in range(q.qsize())]
        assert isinstance(events[-1], DoneEvent) and all(isinstance(e, TokenEvent) for e in events[:-1])
        out.append(([e.token for e in events[:-1]], events[-1].reason))
    return out


GREEDY = SamplingParams(max_tokens=10, temperature=0.0)


@pytest.mark.parametrize("mode", ["eager", "graph", "superkernel"])
def test_engine_alone_gives_transformers_greedy_ids(checkpoint, mode):
    case, cfg = checkpoint
    engine, _, eos, _ = _drained_engine(cfg, mode)
    assert eos == {EOS_WORD}
    want = case.ids["f32"][:10]
    assert EOS_WORD not in want
    assert _drain(engine, [case.prompt], GREEDY) == [(want, "length")]


def test_deepseek_engine_serves_transformers_ids_alone_and_batched(tmp_path_factory):
    """DeepSeek-V3 (the C++ model library's MLA and grouped routing) through the same engine: alone,
    transformers' greedy ids; batched with others, the tokens it gets alone."""
    case, cfg = _checkpoint(tmp_path_factory, "deepseek_v3_packed")
    engine, _, _, _ = _engine(cfg)
    want = case.ids["f32"][:10]
    assert _drain(engine, [case.prompt], GREEDY) == [(want, "length")]
    prompts = [case.prompt, [3, 4], [(5 * i + 1) % 90 for i in range(13)], case.prompt[:5]]
    alone = [_drain(engine, [p], GREEDY)[0] for p in prompts]
    assert _drain(engine, prompts, GREEDY) == alone


def test_engine_batched_requests_get_their_alone_tokens(checkpoint):
    case, cfg = checkpoint
    engine, _, _, _ = _drained_engine(cfg)
    long = [(7 * i + 3) % 90 for i in range(21)]  # three prefill chunks
    prompts = [case.prompt, long, [3, 4], case.prompt[:5], [11] * 9]  # five requests, three rows
    sampled = SamplingParams(max_tokens=8, temperature=0.9, top_p=0.9, seed=5)
    for params in (GREEDY, sampled):
        alone = [_drain(engine, [p], params)[0] for p in prompts]
        together = _drain(engine, prompts, params)
        assert together == alone
    assert alone[0][0] != _drain(engine, [case.prompt], GREEDY)[0][0]  # sampling is not greedy here
    assert _drain(engine, [case.prompt], GREEDY)[0][0] == case.ids["f32"][:10]
    # A request arriving while others are decoding.
    q = queue.Queue()
    engine.submit(long, GREEDY, q.put)
    engine._admit()
    engine.iterate()
    engine.iterate()
    late = _drain(engine, [case.prompt], GREEDY)
    assert late == [(case.ids["f32"][:10], "length")]
    events = [q.get() for _ in range(q.qsize())]
    assert [e.token for e in events if isinstance(e, TokenEvent)] == _drain(engine, [long], GREEDY)[0][0]


def test_engine_stops_at_eos_the_context_and_refuses_what_cannot_fit(checkpoint):
    case, cfg = checkpoint
    engine, _, _, _ = _engine(cfg)
    first = case.ids["f32"][0]
    stop = SamplingParams(max_tokens=10, temperature=0.0, stop_ids=frozenset({first}))
    assert _drain(engine, [case.prompt], stop) == [([], "stop")]
    # A generation up to the context: prompt + completion = CONTEXT; one more is refused.
    room = CONTEXT - len(case.prompt)
    tokens, reason = _drain(engine, [case.prompt], SamplingParams(max_tokens=room, temperature=0.0))[0]
    assert reason == "length" and len(tokens) == room and tokens[:10] == case.ids["f32"][:10]
    with pytest.raises(ValueError, match=f"exceed this server's context of 64 tokens.*at most {room}"):
        engine.submit(case.prompt, SamplingParams(max_tokens=room + 1), lambda ev: None)
    with pytest.raises(ValueError, match="context is 64 tokens"):
        engine.submit(list(range(CONTEXT)), GREEDY, lambda ev: None)
    with pytest.raises(ValueError, match="token id 500 is outside the vocabulary"):
        engine.submit([1, 500], GREEDY, lambda ev: None)
    with pytest.raises(ValueError, match="max_tokens"):
        engine.submit([1], SamplingParams(max_tokens=0), lambda ev: None)
    engine.max_waiting = 1
    engine.submit([1], GREEDY, lambda ev: None)
    with pytest.raises(Overloaded):
        engine.submit([1], GREEDY, lambda ev: None)


def test_generate_on_the_checkpoint_directory(checkpoint, capsys):
    """`python -m superkernel generate DIR --prompt TEXT`: the checkpoint directory itself as the
    config (superkernel mode), text in and out through its tokenizer; greedy, the oracle's words."""
    case, cfg = checkpoint
    d = os.path.dirname(cfg)
    prompt = _words(case.prompt)
    code = _cli.main(["generate", d, "--prompt", prompt, "--max-new-tokens", "10"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.split() == [f"w{i}" for i in case.ids["f32"][:10]]
    assert "10 new tokens, stopped at --max-new-tokens" in err


def test_runtime_section_is_applied_not_ignored(checkpoint, capsys, tmp_path):
    """The config's runtime section configures the process's runtime; once one runs with other
    settings, the command refuses to go on rather than ignore them."""
    import superkernel

    case, cfg = checkpoint
    superkernel.runtime()  # running, with the default settings
    conf = tmp_path / "cores.yaml"
    conf.write_text(open(cfg).read() + "runtime:\n  cores: 1\n  load_policy: static\n")
    code = _cli.main(["generate", str(conf), "--prompt-ids", "1,2", "--max-new-tokens", "2"])
    err = capsys.readouterr().err
    assert code == 3 and "num_cores 1 (running: 0)" in err and "load_policy 'static'" in err, err
    conf.write_text(open(cfg).read() + "runtime:\n  cores: 0\n  load_policy: adaptive\n")  # the running ones
    assert _cli.main(["generate", str(conf), "--prompt-ids", "1,2", "--max-new-tokens", "2", "-q"]) == 0


# ---- HTTP ----


@pytest.fixture(scope="module")
def server(checkpoint):
    import uvicorn

    from superkernel.serve.http import Server, create_app

    case, cfg = checkpoint
    engine, tokenizer, eos, name = _engine(cfg)
    engine.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(Server(engine, tokenizer, name, eos)), host="127.0.0.1",
                                        port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 60
    while not srv.started:
        assert time.time() < deadline, "the server did not start"
        time.sleep(0.05)
    yield case, f"http://127.0.0.1:{port}", name, engine
    srv.should_exit = True
    thread.join(30)
    engine.stop()


def _post(url, body, raw=False):
    data = body if raw else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def _get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.read().decode()


def _words(ids):
    return " ".join(f"w{i}" for i in ids)


def _stop_word_at(words, start):
    """The first index from `start` on (else the first after 0) whose word, as a stop string,
    first occurs in the text at that word (not inside an earlier one: "w7" inside "w71", or a
    repeat)."""
    text = " ".join(words)
    order = list(range(start, len(words))) + list(range(1, start))
    return next(j for j in order if text.find(words[j]) == len(" ".join(words[:j])) + 1)


def _events(text):
    frames = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    return [json.loads(f) for f in frames[:-1]]


def test_http_models_health_and_metrics(server):
    _, url, name, _ = server
    status, body = _get(url + "/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == name
    assert json.loads(_get(url + "/health")[1]) == {"status": "ok"}
    status, text, _ = _post(url + "/v1/completions", {"prompt": "w3 w4", "max_tokens": 2, "temperature": 0})
    assert status == 200, text
    metrics = _get(url + "/metrics")[1]
    for name in ("requests_waiting", "requests_running", "kv_blocks_used", "generation_tokens_total",
                 "time_to_first_token_seconds_bucket", "inter_token_latency_seconds_count",
                 "generation_tokens_per_second"):
        assert f"superkernel_{name}" in metrics, name
    assert "superkernel_generation_tokens_total 0\n" not in metrics


def test_http_completions_plain_and_streamed(server):
    case, url, _, _ = server
    want = case.ids["f32"][:10]
    body = {"prompt": _words(case.prompt), "max_tokens": 10, "temperature": 0}
    status, text, _ = _post(url + "/v1/completions", body)
    assert status == 200, text
    out = json.loads(text)
    assert out["choices"][0]["text"].split() == [f"w{i}" for i in want]
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": len(case.prompt), "completion_tokens": 10,
                            "total_tokens": len(case.prompt) + 10}
    # Token ids as the prompt give the same.
    ids_out = json.loads(_post(url + "/v1/completions", dict(body, prompt=case.prompt))[1])
    assert ids_out["choices"][0]["text"] == out["choices"][0]["text"]
    status, text, headers = _post(url + "/v1/completions", dict(body, stream=True,
                                                                 stream_options={"include_usage": True}))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = _events(text)
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == out["choices"][0]["text"]
    assert events[-1]["usage"]["completion_tokens"] == 10
    # A stop string inside the output ends it there; the stop string is not returned.
    words = [f"w{i}" for i in want]
    cut = _stop_word_at(words, 3)
    stop = words[cut]
    out = json.loads(_post(url + "/v1/completions", dict(body, stop=[stop]))[1])
    assert out["choices"][0]["text"].split() == words[:cut]
    assert out["choices"][0]["finish_reason"] == "stop"
    streamed = _events(_post(url + "/v1/completions", dict(body, stop=stop, stream=True))[1])
    assert "".join(e["choices"][0]["text"] for e in streamed).split() == words[:cut]
    # logprobs: the chosen token is the best of the top 3 at temperature 0.
    out = json.loads(_post(url + "/v1/completions", dict(body, max_tokens=3, logprobs=3))[1])
    lp = out["choices"][0]["logprobs"]
    assert lp["tokens"] == [f"w{i}" for i in want[:3]]
    for token, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert len(top) == 3 and max(top, key=top.get) == token and value == pytest.approx(top[token]) and value <= 0


def test_http_chat_completions(server):
    case, url, _, _ = server
    body = {"messages": [{"role": "user", "content": "w5 w6 w7"}], "max_tokens": 6, "temperature": 0}
    out = json.loads(_post(url + "/v1/chat/completions", body)[1])
    # The template renders "w1 {content} w2 ": the same ids through /v1/completions.
    plain = json.loads(_post(url + "/v1/completions", {"prompt": [1, 5, 6, 7, 2], "max_tokens": 6,
                                                       "temperature": 0})[1])
    msg = out["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["content"] == plain["choices"][0]["text"]
    assert out["object"] == "chat.completion" and out["usage"]["prompt_tokens"] == 5
    events = _events(_post(url + "/v1/chat/completions", dict(body, stream=True))[1])
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == msg["content"]
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    out = json.loads(_post(url + "/v1/chat/completions", dict(body, logprobs=True, top_logprobs=2))[1])
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 6 and all(len(c["top_logprobs"]) == 2 for c in content)


def test_http_concurrent_requests_get_their_alone_tokens(server):
    case, url, _, _ = server
    prompts = [case.prompt, [(5 * i + 1) % 90 for i in range(19)], [3, 4], [9, 9, 9], case.prompt[:4]]
    bodies = [{"prompt": p, "max_tokens": 8, "temperature": 0.8, "seed": 3 + i} for i, p in enumerate(prompts)]
    alone = [json.loads(_post(url + "/v1/completions", b)[1])["choices"][0]["text"] for b in bodies]
    results = [None] * len(bodies)
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, _post(
        url + "/v1/completions", dict(bodies[i], stream=i % 2 == 0))[1])) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, text in enumerate(results):
        got = "".join(e["choices"][0]["text"] for e in _events(text)) if i % 2 == 0 else \
            json.loads(text)["choices"][0]["text"]
        assert got == alone[i], i


def test_http_fuzzed_bodies_get_a_200_or_a_400_and_leave_the_server_well(server):
    """Seeded mutations of valid bodies (http_fuzz.py; SK_HTTP_FUZZ_CASES sets how many, default
    120 per model; SK_HTTP_FUZZ_SEED the seed, default 1): each answer is a 200 or an OpenAI-shaped 400, never a 5xx or a dropped
    connection, and the server still answers a plain request with its greedy tokens afterwards."""
    import http_fuzz

    case, url, _, _ = server
    # Findings of earlier runs, kept as regressions: a deeply nested body (a RecursionError read
    # as the engine's 503), NaN and Infinity as numbers (through every range check).
    for raw in (b'{"prompt": ' + b"[" * 3000 + b"1" + b"]" * 3000 + b"}",
                b'{"prompt": [1], "temperature": NaN}', b'{"prompt": [1], "top_p": Infinity}',
                b'{"prompt": [1], "top_p": 0.0}'):  # and top_p 0, which the sampler refuses (seed 3)
        status, text, _ = _post(url + "/v1/completions", raw, raw=True)
        assert status == 400, (raw[:40], status, text)
    count = int(os.environ.get("SK_HTTP_FUZZ_CASES", "120"))
    seed = int(os.environ.get("SK_HTTP_FUZZ_SEED", "1"))
    for i, (route, raw) in enumerate(http_fuzz.cases(seed=seed, count=count)):
        status, text, _ = _post(url + route, raw, raw=True)
        assert status in (200, 400), f"seed {seed}, case {i}: {route} {raw[:200]!r} -> {status} {text[:300]}"
        if status == 400:
            assert json.loads(text)["error"]["message"], (i, text)
    assert json.loads(_get(url + "/health")[1]) == {"status": "ok"}
    out = json.loads(_post(url + "/v1/completions", {"prompt": case.prompt, "max_tokens": 5, "temperature": 0})[1])
    assert out["choices"][0]["text"].split() == [f"w{i}" for i in case.ids["f32"][:5]]


def test_http_bad_requests_name_the_field(server):
    _, url, _, _ = server
    cases = [
        (b"{not json", "not JSON"),
        ({"prompt": "w1", "frobnicate": 1}, "unknown field 'frobnicate'"),
        ({"prompt": "w1", "n": 2}, "'n': only 1"),
        ({"prompt": "w1", "temperature": 3}, "'temperature': 3 is outside"),
        ({"prompt": "w1", "max_tokens": "ten"}, "'max_tokens': expected an integer"),
        ({"prompt": "w1", "stop": [1]}, "'stop'"),
        ({"prompt": "w1", "presence_penalty": 0.5}, "'presence_penalty': not implemented"),
        ({"prompt": "w1", "model": "other"}, "'model'"),
        ({"prompt": []}, "'prompt'"),
        ({"prompt": [1, 500]}, "token id 500"),
        ({"prompt": list(range(1, 70))}, "context is 64 tokens"),
        ({"prompt": "w1 w2", "max_tokens": 63}, "ask for at most 62"),
        ([1, 2], "JSON object"),
    ]
    for body, message in cases:
        status, text, _ = _post(url + "/v1/completions", body, raw=isinstance(body, bytes))
        assert status == 400, (body, text)
        assert message in json.loads(text)["error"]["message"], (body, text)
    status, text, _ = _post(url + "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert status == 400 and "messages[0]" in text
    status, text, _ = _post(url + "/v1/chat/completions", {"messages": [], "top_logprobs": 2})
    assert status == 400 and "'messages'" in text
    assert json.loads(_get(url + "/health")[1]) == {"status": "ok"}  # nothing of it reached the engine


def test_ignore_eos_keeps_going_past_the_eos_token(server):
    case, url, _, _ = server
    # With the first greedy id as the EOS token, a request stops at it unless it sets ignore_eos.
    engine = server[3]
    from superkernel.serve.http import Server

    srv = Server(engine, None, "m", {case.ids["f32"][0]})
    _, params, _ = srv.parse_completion({"prompt": case.prompt, "max_tokens": 4, "temperature": 0})
    assert params.stop_ids == {case.ids["f32"][0]}
    _, params, _ = srv.parse_completion({"prompt": case.prompt, "max_tokens": 4, "temperature": 0,
                                         "ignore_eos": True})
    assert params.stop_ids == frozenset()
    status, text, _ = _post(url + "/v1/completions", {"prompt": [1], "ignore_eos": 1})
    assert status == 400 and "'ignore_eos': expected true or false" in text


def test_serve_refuses_a_model_without_a_tokenizer(capsys):
    cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "longcat-mini.yaml")
    code = _cli.main(["serve", cfg, "-q"])
    err = capsys.readouterr().err
    assert code == 3 and "no tokenizer" in err and "random weights" in err
    assert _cli.main(["serve", str(cfg), "--max-sequences", "0"]) == 2
    assert "--max-sequences: expected at least 1" in capsys.readouterr().err


def test_openai_client_completions_chat_streaming_and_stop(server):
    from openai import OpenAI

    case, url, name, _ = server
    client = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    want = [f"w{i}" for i in case.ids["f32"][:10]]
    prompt = _words(case.prompt)
    out = client.completions.create(model=name, prompt=prompt, max_tokens=10, temperature=0)
    assert out.choices[0].text.split() == want and out.usage.completion_tokens == 10
    pieces = [c.choices[0].text for c in client.completions.create(model=name, prompt=prompt, max_tokens=10,
                                                                     temperature=0, stream=True)]
    assert "".join(pieces).split() == want
    cut = _stop_word_at(want, 4)
    out = client.completions.create(model=name, prompt=prompt, max_tokens=10, temperature=0, stop=[want[cut]])
    assert out.choices[0].text.split() == want[:cut] and out.choices[0].finish_reason == "stop"
    messages = [{"role": "user", "content": "w5 w6 w7"}]
    chat = client.chat.completions.create(model=name, messages=messages, max_tokens=6, temperature=0)
    streamed = client.chat.completions.create(model=name, messages=messages, max_tokens=6, temperature=0,
                                              stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == chat.choices[0].message.content
    assert [m.id for m in client.models.list().data] == [name]
    from openai import BadRequestError

    with pytest.raises(BadRequestError, match="unknown field 'logit_bias'"):
        client.completions.create(model=name, prompt=prompt, max_tokens=2, logit_bias={"5": 1})


def test_http_disconnect_frees_the_row_and_overload_is_503(server):
    import http.client

    case, url, _, engine = server
    permits = threading.Semaphore(0)
    iterate = engine.iterate

    def gated():  # the engine runs only the iterations the test allows
        permits.acquire()
        iterate()

    engine.iterate = gated
    try:
        before = engine.stats()["finished_by_reason"].get("abort", 0)
        host, port = url[len("http://"):].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": case.prompt, "max_tokens": 40, "stream": True,
                                                            "temperature": 0}), {"Content-Type": "application/json"})
        permits.release(3)  # the prefill (one chunk of 8 and one of 3 tokens), then a decode step
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.read1().startswith(b"data: ")  # the first token arrived
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        deadline = time.time() + 60
        # Aborted (the flag set, or already freed if the third iteration ran after the disconnect).
        while not (any(r is not None and r.aborted for r in engine._slots)
                   or engine.stats()["finished_by_reason"].get("abort", 0) > before):
            assert time.time() < deadline, "the disconnect did not abort the request"
            time.sleep(0.02)
    finally:
        engine.iterate = iterate
        permits.release(100)
    deadline = time.time() + 60
    while engine.stats()["finished_by_reason"].get("abort", 0) == before or engine.stats()["running"]:
        assert time.time() < deadline
        time.sleep(0.02)
    # The others' output is undisturbed.
    out = json.loads(_post(url + "/v1/completions", {"prompt": case.prompt, "max_tokens": 10, "temperature": 0})[1])
    assert out["choices"][0]["text"].split() == [f"w{i}" for i in case.ids["f32"][:10]]
    engine.max_waiting = 0
    try:
        status, text, headers = _post(url + "/v1/completions", {"prompt": "w1", "max_tokens": 2})
    finally:
        engine.max_waiting = 64
    assert status == 503 and "overloaded" in text and headers.get("retry-after") == "1"


def test_serve_command_answers_and_exits_0_on_sigterm(llama_checkpoint):
    import signal
    import subprocess
    import sys

    case, cfg = llama_checkpoint
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "superkernel", "serve", cfg, "--port", str(port), "-q",
                             "--max-context", "64", "--prefill-chunk", "8", "--max-sequences", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                if _get(url + "/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, "the server did not come up"
            time.sleep(0.2)
        out = json.loads(_post(url + "/v1/completions", {"prompt": case.prompt, "max_tokens": 10,
                                                          "temperature": 0})[1])
        assert out["choices"][0]["text"].split() == [f"w{i}" for i in case.ids["f32"][:10]]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"serving '{os.path.basename(os.path.dirname(cfg))}' on http://127.0.0.1:{port}/v1" in err


def test_text_stream_across_token_boundaries():
    """A byte-level BPE tokenizer (trained here: multi-byte characters split over tokens): the
    streamed pieces add up to the whole decode, nothing is released half a character early, and a
    stop string spanning tokens is found and left out."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from superkernel.serve import TextStream

    text = "héllo wörld, 日本語のテキスト and more plain words héllo again"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text.split(" ")[i] for i in range(0, 9, 4)], trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))

    class Wrapped:  # the tokenizer's decode as transformers' tokenizers take it
        def decode(self, ids, skip_special_tokens=True):
            return tok.decode(ids)

    ids = tok.encode(text).ids
    assert len(ids) > len(text.split())  # several tokens per word, split inside characters
    stream, pieces = TextStream(Wrapped()), []
    for i in ids:
        piece, stopped = stream.push(i)
        assert not stopped and "\ufffd" not in piece
        pieces.append(piece)
    pieces.append(stream.flush())
    assert "".join(pieces) == text
    for stop in ("のテキ", "rld, 日", "again"):
        stream, out = TextStream(Wrapped(), [stop, "never"]), []
        for i in ids:
            piece, stopped = stream.push(i)
            out.append(piece)
            if stopped:
                break
        assert stopped and "".join(out) == text[:text.index(stop)], stop
