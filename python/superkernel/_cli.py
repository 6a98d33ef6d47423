"""``python -m superkernel run|bench|explain|generate CONFIG``: the command line's run configs
(docs/CONFIG.md) driving the PyTorch models of ``superkernel.models`` under the superkernel
backend.

    python -m superkernel run configs/longcat-mini.yaml --tokens 8
    python -m superkernel bench configs/longcat-mini.yaml
    python -m superkernel explain configs/longcat-mini.yaml
    python -m superkernel generate CONFIG --prompt "Hello" --max-new-tokens 32 --chat-template

Exit codes as the C++ command line's: 0 success, 1 compiling or running failed, 2 bad arguments,
3 invalid or unsupported config (or model, or checkpoint), 4 ``bench`` found outputs that differ
between modes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import time

from ._files import check_writable, write_json
from ._sampling import Sampler
from .models._architectures import CPP_ONLY
from .models.run_config import ARCHITECTURES

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CONFIG, EXIT_MISMATCH = 0, 1, 2, 3, 4
MODES = ("eager", "graph", "superkernel")


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _config_error(e: Exception) -> CliError:
    return CliError(str(e), EXIT_CONFIG)


# ---- building the model of a config ----------------------------------------------------------


def _architecture(cfg) -> str:
    if cfg.architecture:
        arch = cfg.architecture
    else:
        with open(os.path.join(cfg.checkpoint, "config.json")) as f:
            arch = json.load(f).get("model_type", "")
    if arch not in ARCHITECTURES:
        raise CliError(f"{cfg.where('model.architecture')}: key 'model.architecture': unknown architecture '{arch}'; "
                       f"expected one of {', '.join(ARCHITECTURES)}", EXIT_CONFIG)
    return arch


def _python_sample(cfg) -> str:
    """The architecture, for the commands that run the PyTorch samples (run, bench, explain)."""
    arch = _architecture(cfg)
    if arch in CPP_ONLY:
        raise CliError(f"{cfg.where('model.architecture')}: key 'model.architecture': run, bench and explain here "
                       "run the PyTorch samples of superkernel.models (longcat_flash, longcat_flash_afd); run "
                       f"'{arch}' with the C++ command line (`superkernel run|bench|explain CONFIG`), or from here "
                       "with `generate` and `serve`", EXIT_CONFIG)
    return arch


def build_cpp_model(cfg, mode: str, *, rows: int, max_context: int, prefill_tokens: int, allow_unused: bool):
    """The config's C++ model (superkernel.models.cpp_model.CppModel), compiled in `mode`."""
    from .models.cpp_model import CppModel

    arch = _architecture(cfg)
    opts = cfg.build_options(mode)
    compile_opts = {k: v for k, v in cfg.backend_options(mode).items() if k != "frozen_parameter"}
    where = dict(checkpoint=cfg.checkpoint) if cfg.checkpoint else dict(config=dict(cfg.model_keys), seed=cfg.seed)
    try:
        return CppModel(arch, **where, options=compile_opts, rows=rows, block_size=opts.block_size,
                        max_context=max_context, prefill_tokens=prefill_tokens, weight_dtype=opts.weight_dtype,
                        kv_cache_dtype=opts.kv_cache_dtype, scope_options=cfg.scope_options_for,
                        multi_streams=opts.multi_streams, moe_core_limit=opts.moe_core_limit,
                        allow_unused_tensors=allow_unused)
    except (ValueError, LookupError, NotImplementedError) as e:
        raise _config_error(e) from None


def build_model(cfg, mode: str | None = None, allow_unused: bool = False, options=None):
    """(architecture, model) of a run config: its checkpoint or seeded random weights."""
    from .models import longcat_flash as lc
    from .models._weights import CheckpointWeights, RandomWeights

    arch = _python_sample(cfg)
    try:
        opts = options or cfg.build_options(mode)
        opts.allow_unused_tensors = allow_unused
        if cfg.checkpoint:
            config = lc.LongcatFlashConfig.load(checkpoint=cfg.checkpoint)
            source = CheckpointWeights(cfg.checkpoint)
        else:
            try:
                config = lc.LongcatFlashConfig.load(values=dict(cfg.model_keys))
            except Exception as e:  # a model.config key: point at its line
                key = next((k for k in cfg.model_keys if f"'{k}'" in str(e)), None)
                where = cfg.where(f"model.config.{key}" if key else "model.config")
                raise CliError(f"{where}: {e}", EXIT_CONFIG) from None
            source = RandomWeights(cfg.seed)
        cls = lc.LongcatFlashAfd if arch == "longcat_flash_afd" else lc.LongcatFlash
        return arch, cls(config, opts, source)
    except CliError:
        raise
    except (ValueError, LookupError, NotImplementedError) as e:
        raise _config_error(e) from None


def default_prompts(cfg, vocab: int) -> list[list[int]]:
    """The C++ command line's seed-dependent prompts: the same ids for the same config."""
    mask = (1 << 64) - 1
    prompts = []
    for b in range(cfg.batch):
        ids = []
        for i in range(cfg.prompt_tokens):
            h = (((cfg.sampling_seed + 1) * 0x9E3779B97F4A7C15) & mask) ^ ((b * 7919 + i * 104729 + 1) & mask)
            ids.append(h % max(vocab, 1))
        prompts.append(ids)
    return prompts


def _parse_ids(text: str, what: str = "--prompt") -> list[int]:
    items = text.split(",") if text else []
    if not items:
        raise CliError(f"{what}: expected comma-separated token ids >= 0, got nothing", EXIT_USAGE)
    out = []
    for item in items:
        item = item.strip()
        if not item.isdigit():
            raise CliError(f"{what}: expected comma-separated token ids >= 0, got '{item}'", EXIT_USAGE)
        out.append(int(item))
    return out


def _step_options(cfg, mode: str) -> dict:
    """torch.compile options for the sample's steps: the commands build the model from the config
    and only run it, so dynamo need not re-check its modules on every call (frozen_modules)."""
    return cfg.backend_options(mode, frozen_modules=True)


def _log(args, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr, flush=True)


def _report_skipped(args, model) -> None:
    if getattr(args, "verbose", False):
        for key, line, why in getattr(model.config, "ignored", []):
            print(f"config.json:{line}: key '{key}' ignored: {why}", file=sys.stderr)
        for name in model.skipped_tensors:
            print(f"tensor '{name}' not read", file=sys.stderr)


def _afd_inputs(cfg, model):
    import torch

    gen = torch.Generator().manual_seed(cfg.sampling_seed)
    return torch.rand([cfg.batch, model.config.hidden_size], generator=gen) * 2 - 1


# ---- commands ----------------------------------------------------------------------------------


def cmd_run(args, cfg) -> int:
    from .models import longcat_flash as lc

    mode = args.mode or cfg.exe_mode
    if args.tokens:
        cfg.new_tokens = args.tokens
    prompt = _parse_ids(args.prompt) if args.prompt is not None else None
    if prompt is not None:
        if _architecture(cfg) == "longcat_flash_afd":
            raise CliError("--prompt: the FFN-only model longcat_flash_afd takes no tokens (it steps over hidden "
                           "states from the attention side); leave --prompt out", EXIT_USAGE)
        cfg.prompt_tokens = len(prompt)
    arch, model = build_model(cfg, mode, args.allow_unused_tensors)
    _report_skipped(args, model)
    how = "called through torch.compile" if args.no_replay else "the first captured, the others replayed"
    print(f"model: {arch} ({model.source}), mode {mode}, Python sample under torch.compile(backend='superkernel'); "
          f"steps: {how}")
    import torch

    import superkernel

    if arch == "longcat_flash_afd":
        step = lc.compile_step(model.forward, _step_options(cfg, mode))
        x = _afd_inputs(cfg, model)
        times = []
        replayed = static = None
        with torch.inference_mode():
            for i in range(cfg.new_tokens):
                _log(args, f"FFN step {i + 1}/{cfg.new_tokens}")
                t0 = time.perf_counter()
                if args.no_replay:
                    x = step(x)
                elif replayed is None:  # the first step is captured, the others replay it
                    static = x.clone()
                    replayed = superkernel.capture(step, static)
                    x = replayed.result
                else:
                    static.copy_(x)
                    x = replayed()
                times.append(time.perf_counter() - t0)
        print(f"FFN-only model: {cfg.new_tokens} steps over hidden states (no tokens)")
        # %g: the FFN output of random small weights shrinks step after step (each step's input is
        # the previous step's output, as the C++ command runs it); fixed-point would print 0.
        print(f"hidden_states_out checksum {float(x.double().sum()):.6g}, largest |value| "
              f"{float(x.abs().max()):.3g}")
        _print_latencies(times[1:] or times, cfg.batch)
        return EXIT_OK
    session = lc.Session(model, _step_options(cfg, mode), replay=not args.no_replay)
    prompts = [prompt] * cfg.batch if prompt is not None else default_prompts(cfg, model.config.vocab_size)
    sampler = Sampler(cfg.temperature, cfg.top_k, cfg.top_p, cfg.sampling_seed)
    _log(args, "prefill (compiles the prefill graph)")
    ids = [sampler(session.prefill(prompts))]
    times = []
    for i in range(cfg.new_tokens - 1):
        _log(args, f"decode {i + 1}/{cfg.new_tokens - 1}")
        t0 = time.perf_counter()
        logits = session.decode(ids[-1])
        times.append(time.perf_counter() - t0)
        ids.append(sampler(logits))
    for b in range(cfg.batch):
        print(f"sequence {b}: prompt {' '.join(map(str, prompts[b]))}")
        print(f"sequence {b}: ids {' '.join(str(step[b]) for step in ids)}")
    if times:
        # The first decode step compiles the decode graph: timed steps are the ones after it.
        _print_latencies(times[1:] or times, cfg.batch)
    else:
        print("decode: no decode step (the one new token comes from the prefill)")
    return EXIT_OK


def _print_latencies(times, batch) -> None:
    print("step  latency_ms")
    for i, t in enumerate(times):
        print(f"{i:4d}  {t * 1e3:.3f}")
    med = statistics.median(times)
    print(f"decode: median {med * 1e3:.3f} ms/step (min {min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f}), "
          f"{batch / med:.1f} tokens/s")


def _timed_session(cfg, model, mode, replay):
    """A compiled session at the state `bench` times: prefill, then every decode step; returns
    (session, the logits of every step, the ids)."""
    from .models import longcat_flash as lc

    session = lc.Session(model, _step_options(cfg, mode), replay=replay)
    prompts = default_prompts(cfg, model.config.vocab_size)
    sampler = Sampler(cfg.temperature, cfg.top_k, cfg.top_p, cfg.sampling_seed)
    logits = [session.prefill(prompts)]
    ids = [sampler(logits[-1])]
    for _ in range(cfg.new_tokens - 1):
        logits.append(session.decode(ids[-1]).clone())  # a replayed step overwrites its logits
        ids.append(sampler(logits[-1]))
    return session, logits, ids


def cmd_bench(args, cfg) -> int:
    import torch

    import superkernel

    from .models import longcat_flash as lc

    if args.runs:
        cfg.runs = args.runs
    if cfg.new_tokens < 2:
        raise CliError(f"{cfg.where('decode.new_tokens')}: key 'decode.new_tokens': bench needs at least 2 (a decode "
                       "step to time)", EXIT_CONFIG)
    arch = _architecture(cfg)
    results, outputs = {}, {}
    steps = {}
    for mode in MODES:
        _log(args, f"{mode}: building and compiling")
        _, model = build_model(cfg, mode, args.allow_unused_tensors)
        if arch == "longcat_flash_afd":
            step = lc.compile_step(model.forward, _step_options(cfg, mode))
            x = _afd_inputs(cfg, model)
            with torch.inference_mode():
                if args.no_replay:
                    out = step(x)
                    steps[mode] = (lambda step=step, x=x: step(x))
                else:
                    steps[mode] = superkernel.capture(step, x)
                    out = steps[mode].result.clone()
            outputs[mode] = ([out], [])
        else:
            session, logits, ids = _timed_session(cfg, model, mode, not args.no_replay)
            outputs[mode] = (logits, ids)
            # Time the last decode step again and again: the same inputs, the same cache slots.
            s = session.layout
            s.lens = [n - 1 for n in s.lens]
            steps[mode] = session.timed_decode(s.decode(ids[-2]))
    ref = outputs["eager"]
    for mode in MODES[1:]:
        got = outputs[mode]
        same = got[1] == ref[1] and all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                                        for a, b in zip(got[0], ref[0]))
        if not same:
            print(f"bench: {mode} mode's outputs differ from eager mode's", file=sys.stderr)
            return EXIT_MISMATCH
    samples = {m: [] for m in MODES}
    with torch.inference_mode():
        for m in MODES:
            for _ in range(cfg.warmup):
                steps[m]()
        for _ in range(cfg.runs):  # interleaved rounds: drift hits every mode alike
            for m in MODES:
                t0 = time.perf_counter()
                steps[m]()
                samples[m].append(time.perf_counter() - t0)
    for m in MODES:
        med = statistics.median(samples[m])
        mad = statistics.median(abs(t - med) for t in samples[m])
        results[m] = (med, mad)
    how = "compiled calls" if args.no_replay else "the captured step replayed"
    print(f"Python sample ({arch}), {cfg.runs} timed decode steps per mode ({how}), outputs bit-identical across "
          "modes\n")
    print("| mode | step (ms) | tokens/s | vs eager | vs graph |")
    print("|---|---:|---:|---:|---:|")
    for m in MODES:
        med, mad = results[m]
        print(f"| {m} | {med * 1e3:.3f} ± {mad * 1e3:.3f} | {cfg.batch / med:.1f} | "
              f"{results['eager'][0] / med:.2f}x | {results['graph'][0] / med:.2f}x |")
    if args.json:
        try:
            write_json(args.json, {"benchmark": "python_sample", "config": cfg.file, "architecture": arch,
                                   "modes": {m: {"step_latency": results[m][0], "mad": results[m][1],
                                                 "tokens_per_s": cfg.batch / results[m][0]} for m in MODES}})
        except OSError as e:
            raise CliError(f"--json: {e}", EXIT_FAILED) from None
    return EXIT_OK


def cmd_explain(args, cfg) -> int:
    import torch

    import superkernel

    mode = args.mode or cfg.exe_mode
    from .models import longcat_flash as lc

    arch, model = build_model(cfg, mode, args.allow_unused_tensors)
    _report_skipped(args, model)
    if arch == "longcat_flash_afd":
        fn = lc.compile_step(model.forward, _step_options(cfg, mode))
        inputs = (_afd_inputs(cfg, model),)
    else:
        fn = lc.compile_step(model.decode, _step_options(cfg, mode))
        layout = lc.PagedCacheLayout(model.options)
        s = layout.decode([0] * cfg.batch)
        inputs = (s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.context_lens)
    with torch.inference_mode():
        text = superkernel.explain(fn, *inputs)
    print(f"model: {arch} ({model.source}), decode step, mode {mode}")
    print(text)
    return EXIT_OK


def _tokenizer(cfg):
    if not cfg.checkpoint:
        raise CliError(f"{cfg.file}: the model has random weights (no model.checkpoint), so it has no tokenizer: "
                       "give token ids with --prompt-ids, or a checkpoint saved with its tokenizer", EXIT_CONFIG)
    files = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
    if not any(os.path.isfile(os.path.join(cfg.checkpoint, f)) for f in files):
        raise CliError(f"checkpoint {cfg.checkpoint}: no tokenizer (tokenizer.json / tokenizer_config.json); give "
                       "token ids with --prompt-ids", EXIT_CONFIG)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(cfg.checkpoint)
    except Exception as e:  # noqa: BLE001 - whatever the files hold: say which files, and what went wrong
        present = ", ".join(f for f in files + ("special_tokens_map.json",)
                            if os.path.isfile(os.path.join(cfg.checkpoint, f)))
        raise CliError(f"checkpoint {cfg.checkpoint}: cannot read its tokenizer ({present}): "
                       f"{type(e).__name__}: {e}", EXIT_CONFIG) from None


def _encode(cfg, tokenizer, text: str, chat_template: bool) -> list[int]:
    """The prompt's token ids: `text` as a user message through the chat template, or the text
    itself. A template that does not render, or renders to something that is not text, is an
    error naming the checkpoint's template."""
    if not chat_template:
        try:
            return list(tokenizer(text)["input_ids"])
        except Exception as e:  # noqa: BLE001
            raise CliError(f"checkpoint {cfg.checkpoint}: its tokenizer cannot encode the prompt: "
                           f"{type(e).__name__}: {e}", EXIT_CONFIG) from None
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise CliError(f"checkpoint {cfg.checkpoint}: the tokenizer has no chat template "
                       "(tokenizer_config.json 'chat_template'); leave --chat-template out", EXIT_CONFIG)
    try:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = [int(i) for i in ids]
    except Exception as e:  # noqa: BLE001 - a template is a program: any error of its is the checkpoint's
        raise CliError(f"checkpoint {cfg.checkpoint}: its chat template (tokenizer_config.json 'chat_template' "
                       f"or chat_template.jinja) does not render: {type(e).__name__}: {e}", EXIT_CONFIG) from None
    return ids


def _eos_ids(cfg, tokenizer) -> set[int]:
    ids = set()
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    if cfg.checkpoint:
        for name in ("generation_config.json", "config.json"):
            path = os.path.join(cfg.checkpoint, name)
            if not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise CliError(f"{path}: not a JSON file: {e}", EXIT_CONFIG) from None
            value = data.get("eos_token_id") if isinstance(data, dict) else None
            if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                ids.update(value)
            elif isinstance(value, int) and not isinstance(value, bool):
                ids.add(value)
            elif value is not None:
                raise CliError(f"{path}: key 'eos_token_id': expected a token id or a list of them, got {value!r}",
                               EXIT_CONFIG)
    return ids


def cmd_generate(args, cfg) -> int:
    from .models import longcat_flash as lc

    if (args.prompt is None) == (args.prompt_ids is None):
        raise CliError("generate: give exactly one of --prompt TEXT and --prompt-ids IDS", EXIT_USAGE)
    if args.chat_template and args.prompt is None:
        raise CliError("--chat-template applies to --prompt TEXT", EXIT_USAGE)
    if _architecture(cfg) == "longcat_flash_afd":
        raise CliError("generate: the FFN-only model longcat_flash_afd makes no tokens", EXIT_USAGE)
    tokenizer = None
    if args.prompt is not None:
        tokenizer = _tokenizer(cfg)
        prompt = _encode(cfg, tokenizer, args.prompt, args.chat_template)
        if not prompt:
            raise CliError("--prompt: the text has no tokens", EXIT_USAGE)
    else:
        prompt = _parse_ids(args.prompt_ids, "--prompt-ids")
        if cfg.checkpoint and any(os.path.isfile(os.path.join(cfg.checkpoint, f))
                                  for f in ("tokenizer.json", "tokenizer_config.json")):
            tokenizer = _tokenizer(cfg)
    mode = args.mode or cfg.exe_mode
    max_new = args.max_new_tokens if args.max_new_tokens is not None else cfg.new_tokens
    cfg.batch, cfg.prompt_tokens, cfg.new_tokens = 1, len(prompt), max_new
    if args.temperature is not None:
        cfg.temperature = args.temperature
    if args.top_k is not None:
        cfg.top_k = args.top_k
    if args.top_p is not None:
        cfg.top_p = args.top_p
    if args.seed is not None:
        cfg.sampling_seed = args.seed
    if cfg.temperature == 0 and (cfg.top_k or cfg.top_p != 1.0) and (args.top_k or args.top_p):
        raise CliError("--top-k / --top-p have no effect with temperature 0 (argmax); set --temperature above 0",
                       EXIT_USAGE)
    eos = _eos_ids(cfg, tokenizer)
    if _architecture(cfg) in CPP_ONLY:
        tokens = _engine_tokens(cfg, mode, args.allow_unused_tensors, prompt, max_new, eos)
    else:
        tokens = _session_tokens(cfg, mode, args, prompt, max_new, eos)
    out = sys.stdout
    ids: list[int] = []
    shown = ""
    stop = "eos"
    for token in tokens:
        ids.append(token)
        if tokenizer is not None:
            text = tokenizer.decode(ids, skip_special_tokens=True)
            # Print what became stable: a partial multi-byte character waits for its next token.
            if not text.endswith("\ufffd"):
                out.write(text[len(shown):])
                shown = text
        else:
            out.write(("" if len(ids) == 1 else " ") + str(token))
        out.flush()
        if len(ids) >= max_new:
            stop = "length"
    out.write("\n")
    _log(args, f"[{len(ids)} new tokens, stopped at {'EOS' if stop == 'eos' else '--max-new-tokens'}; ids "
               f"{' '.join(map(str, ids))}]")
    return EXIT_OK


def _check_prompt(prompt: list[int], vocab: int) -> None:
    if any(i >= vocab for i in prompt):
        raise CliError(f"prompt: token id {max(prompt)} is outside the vocabulary ({vocab} ids)", EXIT_USAGE)


def _session_tokens(cfg, mode, args, prompt, max_new, eos):
    """The new tokens of the PyTorch sample (up to max_new, without the EOS)."""
    from .models import longcat_flash as lc

    _, model = build_model(cfg, mode, args.allow_unused_tensors)
    _check_prompt(prompt, model.config.vocab_size)
    session = lc.Session(model, _step_options(cfg, mode), replay=not args.no_replay)
    sampler = Sampler(cfg.temperature, cfg.top_k, cfg.top_p, cfg.sampling_seed)
    # The prompt goes through the decode graph token by token: one graph to compile, whatever
    # the prompt's length (a prefill graph has the prompt's length in its static shapes).
    logits = session.prompt_by_decode([prompt])
    for n in range(max_new):
        token = sampler(logits)[0]
        if token in eos:
            return
        yield token
        if n + 1 < max_new:
            logits = session.decode([token])


# Prompt tokens per prefill launch of `generate` on a C++ model: one graph to compile, a longer
# prompt in several launches.
GENERATE_PREFILL_CHUNK = 64


def _engine_tokens(cfg, mode, allow_unused, prompt, max_new, eos):
    """The new tokens of the config's C++ model, one request through the server's engine (the
    same steps `serve` runs, on this thread)."""
    from .serve import Engine, SamplingParams, TokenEvent

    model = build_cpp_model(cfg, mode, rows=1, max_context=len(prompt) + max_new + 1,
                            prefill_tokens=min(len(prompt), GENERATE_PREFILL_CHUNK), allow_unused=allow_unused)
    _check_prompt(prompt, model.vocab_size)
    engine = Engine(model)
    events: list = []
    params = SamplingParams(max_tokens=max_new, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                            seed=cfg.sampling_seed, stop_ids=frozenset(eos))
    request = engine.submit(prompt, params, events.append)
    while True:
        if request.done is None:
            engine.step()
        while events:
            event = events.pop(0)
            if isinstance(event, TokenEvent):
                yield event.token
            elif event.reason == "error":
                raise CliError(f"generate: {event.message}", EXIT_FAILED)
        if request.done is not None:
            return


def serve_engine(args, cfg):
    """(engine, tokenizer, eos ids, model name) of `serve`: the model built with one sequence row per
    concurrent request, both steps compiled and run once before any request (so a bad config fails
    at start, and the first request does not pay the compiles)."""
    import dataclasses

    from .serve import Engine, TorchSteps

    arch = _architecture(cfg)
    if arch == "longcat_flash_afd":
        raise CliError("serve: the FFN-only model longcat_flash_afd makes no tokens", EXIT_USAGE)
    tokenizer = _tokenizer(cfg)  # a checkpoint without one is refused here, saying what is missing
    mode = args.mode or cfg.exe_mode
    block = 16
    context = -(-args.max_context // block) * block
    if arch in CPP_ONLY:  # the C++ model library's graphs, compiled by the runtime
        steps = build_cpp_model(cfg, mode, rows=args.max_sequences, max_context=context,
                                prefill_tokens=args.prefill_chunk, allow_unused=args.allow_unused_tensors)
    else:  # the PyTorch sample, compiled with the superkernel backend
        opts = dataclasses.replace(cfg.build_options(mode), batch=args.max_sequences, max_context=context,
                                   prefill_tokens=args.prefill_chunk)
        _, model = build_model(cfg, mode, args.allow_unused_tensors, options=opts)
        steps = TorchSteps(model, _step_options(cfg, mode), replay=not args.no_replay)
    engine = Engine(steps, max_waiting=args.max_waiting)
    _log(args, f"serve: compiling the prefill ({args.prefill_chunk} tokens) and decode ({args.max_sequences} "
               f"sequences, one launch size per power of two) steps, mode {mode}")
    engine.warm_up()
    name = args.model_name or os.path.basename(os.path.normpath(cfg.checkpoint))
    return engine, tokenizer, _eos_ids(cfg, tokenizer), name


def cmd_serve(args, cfg) -> int:
    for flag in ("max_sequences", "max_context", "prefill_chunk", "max_waiting", "max_tokens"):
        if getattr(args, flag) < 1:
            raise CliError(f"--{flag.replace('_', '-')}: expected at least 1, got {getattr(args, flag)}", EXIT_USAGE)
    if not 0 < args.port < 65536:
        raise CliError(f"--port: expected 1-65535, got {args.port}", EXIT_USAGE)
    import uvicorn

    from .serve.http import Server, create_app

    engine, tokenizer, eos, name = serve_engine(args, cfg)
    server = Server(engine, tokenizer, name, eos, default_max_tokens=args.max_tokens)
    engine.start()
    print(f"serving '{name}' on http://{args.host}:{args.port}/v1 ({args.max_sequences} sequences of up to "
          f"{engine.max_context} tokens, prefill chunks of {args.prefill_chunk})", file=sys.stderr, flush=True)

    class GracefulServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # the signals stay with the handlers below
            yield

    http = GracefulServer(uvicorn.Config(create_app(server), host=args.host, port=args.port, log_level="warning"))
    # SIGTERM and SIGINT: stop accepting, let the running responses finish, exit 0 (uvicorn's own
    # handling re-raises the signal after its shutdown, which would end the process with it).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: setattr(http, "should_exit", True))
    try:
        http.run()
    finally:
        engine.stop()
    print("serve: stopped", file=sys.stderr, flush=True)
    return EXIT_OK


# ---- entry -------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: {message}", EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m superkernel", description="Run the PyTorch model samples of superkernel.models from "
                "the command line's YAML configs (docs/CONFIG.md) under torch.compile(backend='superkernel').")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp):
        sp.add_argument("config", help="YAML run config (configs/*.yaml)")
        sp.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
        sp.add_argument("-v", "--verbose", action="store_true",
                        help="list the checkpoint's ignored config.json keys and unread tensors")
        sp.add_argument("--allow-unused-tensors", action="store_true",
                        help="run a checkpoint holding tensors no graph reads")

    def mode(sp):
        sp.add_argument("--mode", choices=MODES, help="execution mode (default: the config's exe_mode)")

    def replay(sp):
        sp.add_argument("--no-replay", action="store_true",
                        help="call the compiled decode step through torch.compile at every step instead of "
                             "replaying the first one captured (superkernel.capture)")

    run = sub.add_parser("run", help="prefill, then decode steps; prints the ids and step latencies")
    common(run)
    mode(run)
    run.add_argument("--prompt", help="comma-separated prompt token ids (default: the config's seeded prompt)")
    run.add_argument("--tokens", type=int, help="new ids per sequence (overrides decode.new_tokens)")
    replay(run)
    bench = sub.add_parser("bench", help="every mode side by side: outputs bit-identical, median decode step")
    common(bench)
    bench.add_argument("--runs", type=int, help="timed decode steps per mode")
    bench.add_argument("--json", help="write the results as JSON")
    replay(bench)
    explain = sub.add_parser("explain", help="what the compiler makes of the decode step (scopes, segments)")
    common(explain)
    mode(explain)
    gen = sub.add_parser("generate", help="text in, text out, with the checkpoint's tokenizer")
    common(gen)
    mode(gen)
    gen.add_argument("--prompt", help="prompt text (tokenized with the checkpoint's tokenizer)")
    gen.add_argument("--prompt-ids", help="comma-separated prompt token ids (checkpoints without a tokenizer)")
    gen.add_argument("--chat-template", action="store_true", help="apply the tokenizer's chat template")
    gen.add_argument("--max-new-tokens", type=int, help="stop after this many new tokens (default decode.new_tokens)")
    gen.add_argument("--temperature", type=float, help="0: argmax (default decode.sampling.temperature)")
    gen.add_argument("--top-k", type=int, help="keep the k best tokens (0: all)")
    gen.add_argument("--top-p", type=float, help="keep the shortest prefix reaching this probability")
    gen.add_argument("--seed", type=int, help="sampling seed")
    replay(gen)
    srv = sub.add_parser("serve", help="an OpenAI-compatible HTTP server with continuous batching (docs/SERVING.md)")
    common(srv)
    mode(srv)
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--model-name", help="the model id clients name (default: the checkpoint directory's name)")
    srv.add_argument("--max-sequences", type=int, default=4, help="sequences decoded together (default 4)")
    srv.add_argument("--max-context", type=int, default=256,
                     help="tokens per sequence, prompt and completion (default 256; whole blocks of 16)")
    srv.add_argument("--prefill-chunk", type=int, default=32, help="prompt tokens per prefill launch (default 32)")
    srv.add_argument("--max-waiting", type=int, default=64, help="queued requests before 503 (default 64)")
    srv.add_argument("--max-tokens", type=int, default=16, help="max_tokens of a request that names none")
    replay(srv)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        for name in ("tokens", "runs", "max_new_tokens"):
            value = getattr(args, name, None)
            if value is not None and value < 1:
                raise CliError(f"--{name.replace('_', '-')}: expected at least 1, got {value}", EXIT_USAGE)
        from .models import run_config

        try:
            cfg = run_config.load(args.config)
        except (ValueError, LookupError) as e:
            raise _config_error(e) from None
        from . import _runtime_default

        try:  # the config's runtime section, before anything starts the runtime
            _runtime_default.configure_for(**cfg.runtime_options())
        except RuntimeError as e:
            raise CliError(f"{cfg.where('runtime')}: key 'runtime': {e}", EXIT_CONFIG) from None
        if getattr(args, "json", None):
            try:
                check_writable(args.json)  # before the run: a bad path fails now, not after it
            except OSError as e:
                raise CliError(f"--json: {e}", EXIT_USAGE) from None
        command = {"run": cmd_run, "bench": cmd_bench, "explain": cmd_explain, "generate": cmd_generate,
                   "serve": cmd_serve}
        return command[args.command](args, cfg)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except Exception as e:  # noqa: BLE001 - compiling or running failed: say what, exit 1
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
