"""The LongCat-Flash sample (superkernel.models.longcat_flash) against the published definition
itself: transformers' LongcatFlashForCausalLM, float32 and float64, on the seeded tiny
checkpoints of tests/models/oracle.py (longcat_oracle.py).

Each case runs the prompt (11 tokens: three blocks of a 4-token paged cache) through the prefill
graph and 15 greedy steps through the decode graph, both compiled with
torch.compile(backend="superkernel", fullgraph=True, dynamic=False), and requires transformers'
16 greedy ids and every logit within 1e-4 + 1e-4 * |want| of both transformers runs (the C++
model's bound; the largest difference measured is printed by the test). One case runs in the
three execution modes, with the MoE on its own stream, and in plain torch, all bit-identical; the
random-weight config is checked bit-identical to the C++ model.
"""

import numpy as np
import pytest
import torch

import superkernel as sk
from longcat_oracle import Case
from superkernel.models import longcat_flash as lc

ATOL = RTOL = 1e-4
BLOCK = 4


def options(case, **kw):
    need = len(case.prompt) + case.steps - 1
    base = dict(block_size=BLOCK, max_context=-(-need // BLOCK) * BLOCK, prefill_tokens=len(case.prompt))
    base.update(kw)
    return lc.BuildOptions(**base)


def greedy(session, case, prefill=False):
    """Greedy ids and logits [steps, vocab]: the prompt (through the prefill graph, or token by
    token through the decode graph), then steps - 1 decode steps."""
    first = session.prefill([case.prompt]) if prefill else session.prompt_by_decode([case.prompt])
    rows = [first[0].clone()]  # a replaying session overwrites its logits at the next step
    ids = [int(rows[-1].argmax())]
    for _ in range(case.steps - 1):
        rows.append(session.decode([ids[-1]])[0].clone())
        ids.append(int(rows[-1].argmax()))
    return ids, torch.stack(rows)


def check_against_transformers(case, ids, logits):
    got = logits.double().numpy()
    worst = 0.0
    for dtype in ("f32", "f64"):
        assert ids == case.ids[dtype], f"{case.name}: greedy ids differ from transformers ({dtype})"
        want = case.logits[dtype]
        err = np.abs(got - want) - RTOL * np.abs(want)
        assert (err <= ATOL).all(), f"{case.name} ({dtype}): largest |got - want| {np.abs(got - want).max():.3g}"
        worst = max(worst, float(np.abs(got - want).max()))
    print(f"{case.name}: largest logit difference to transformers {worst:.2g}")
    return worst


_superkernel_runs = {}


def superkernel_run(name):
    """(ids, logits) of a case in superkernel mode, decode graph only (computed once)."""
    if name not in _superkernel_runs:
        case = Case(name)
        model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
        _superkernel_runs[name] = greedy(lc.Session(model, lc.compile_options("superkernel")), case)
    return _superkernel_runs[name]


@pytest.mark.parametrize("name", ["longcat_packed", "longcat_per_expert", "longcat_small_lora", "longcat_yarn",
                                  "longcat_dynamic", "longcat_tied_bias"])
def test_matches_transformers_in_superkernel_mode(name):
    """Packed and per-expert experts (zero-computation experts chosen), the LoRA norms' eps, yarn
    with mscale_all_dim (rope_parameters), dynamic RoPE decoding past max_position_embeddings
    (rope_scaling + rope_theta), tied embeddings with attention biases."""
    ids, logits = superkernel_run(name)
    check_against_transformers(Case(name), ids, logits)


def test_prefill_graph_matches_transformers():
    """The prompt through the prefill graph (mla_attention_prefill over three cache blocks)."""
    case = Case("longcat_per_expert")
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
    ids, logits = greedy(lc.Session(model, lc.compile_options("superkernel")), case, prefill=True)
    check_against_transformers(case, ids, logits)


def test_every_mode_plain_torch_and_multi_streams_bit_identical():
    """The same checkpoint in eager and graph mode, in superkernel mode with the MoE on stream
    "moe" under a core limit, and uncompiled (each kernel op run on its own): the superkernel
    mode's logits bit for bit."""
    case = Case("longcat_packed")
    ref_ids, ref = superkernel_run(case.name)
    variants = {"eager": (dict(enable_superkernel=False), "eager"),
                "graph": (dict(enable_superkernel=False), "graph"),
                "superkernel+streams": (dict(multi_streams=1, moe_core_limit=1), "superkernel")}
    for label, (kw, mode) in variants.items():
        model = lc.LongcatFlash.from_checkpoint(case.dir, options(case, **kw))
        ids, logits = greedy(lc.Session(model, lc.compile_options(mode)), case)
        assert ids == ref_ids, label
        assert torch.equal(logits.view(torch.int32), ref.view(torch.int32)), label
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
    session = lc.Session(model, None)
    plain = [session.prompt_by_decode([case.prompt])[0], session.decode([ref_ids[0]])[0]]
    assert torch.equal(torch.stack(plain).view(torch.int32), ref[:2].view(torch.int32))


class RouterProbe:
    """Wraps torch.ops.superkernel.moe_router in plain torch to record the chosen expert ids."""

    def __init__(self):
        self.ids = []

    def __getattr__(self, name):
        op = getattr(torch.ops.superkernel, name)
        if name != "moe_router":
            return op

        def router(*args, **kwargs):
            out = op(*args, **kwargs)
            self.ids.append(out[0].clone())
            return out

        return router


def test_zero_experts_are_chosen(monkeypatch):
    """The oracle checkpoints were picked so that transformers routes tokens to zero-computation
    experts; the sample's router picks them too (ids >= n_routed_experts)."""
    case = Case("longcat_packed")
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
    probe = RouterProbe()
    monkeypatch.setattr(lc, "ops", probe)
    lc.Session(model, None).prompt_by_decode([case.prompt])
    chosen = torch.cat([ids.flatten() for ids in probe.ids])
    assert (chosen >= model.config.n_routed_experts).any()
    assert (chosen < model.config.n_routed_experts).any()


def test_frozen_modules_same_bits():
    """compile_options(frozen_modules=True), as `python -m superkernel` compiles the sample: dynamo
    skips the guards on the model's modules, which changes no bit of the 16 steps."""
    case = Case("longcat_packed")
    ref_ids, ref = superkernel_run(case.name)
    opts = lc.compile_options("superkernel", frozen_modules=True)
    assert opts["guard_filter_fn"] is torch.compiler.skip_guard_on_all_nn_modules_unsafe
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
    ids, logits = greedy(lc.Session(model, opts), case)
    assert ids == ref_ids
    assert torch.equal(logits.view(torch.int32), ref.view(torch.int32))


@pytest.mark.parametrize("prefill", [False, True])
def test_replayed_decode_same_bits(prefill):
    """Session(replay=True), as `python -m superkernel` runs the sample: the first decode step is
    captured (superkernel.capture) and the others replay it; ids and logits are the compiled
    calls' bits, whether the prompt went through the prefill graph or the decode graph."""
    case = Case("longcat_packed")
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case))
    if prefill:
        ref_ids, ref = greedy(lc.Session(model, lc.compile_options("superkernel")), case, prefill=True)
        model.clear_caches()
    else:
        ref_ids, ref = superkernel_run(case.name)
    session = lc.Session(model, lc.compile_options("superkernel"), replay=True)
    ids, logits = greedy(session, case, prefill=prefill)
    assert session._captured is not None
    assert ids == ref_ids
    assert torch.equal(logits.view(torch.int32), ref.view(torch.int32))
    with pytest.raises(sk.InvalidArgumentError, match="replay needs a compiled session"):
        lc.Session(model, None, replay=True)


def test_bf16_weights_and_cache_near_transformers():
    """bf16 weights and latent cache: the ids of the f32 run's first steps, logits within 3e-2."""
    case = Case("longcat_packed")
    model = lc.LongcatFlash.from_checkpoint(case.dir, options(case, weight_dtype="bf16", kv_cache_dtype="bf16"))
    session = lc.Session(model, lc.compile_options("superkernel"))
    row = session.prompt_by_decode([case.prompt])[0].double().numpy()
    want = case.logits["f64"][0]
    assert np.abs(row - want).max() <= 3e-2 + 3e-2 * np.abs(want).max()


def test_random_weights_bit_identical_to_the_cpp_model():
    """Without a checkpoint the sample takes the C++ models' seeded random weights by name: its
    decode logits equal the C++ model's (cpp_models.build_longcat_flash) bit for bit."""
    values = dict(vocab_size=64, hidden_size=32, num_layers=2, num_attention_heads=2, q_lora_rank=16,
                  kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, ffn_hidden_size=48,
                  expert_ffn_hidden_size=16, n_routed_experts=4, zero_expert_num=2, moe_topk=2)
    opts = lc.BuildOptions(batch=2, block_size=4, max_context=8, prefill_tokens=4)
    model = lc.LongcatFlash.random(values, opts, seed=3)
    # Some cache contents, so the attention reads more than zeros.
    gen = torch.Generator().manual_seed(0)
    for cache in model.caches():
        cache.copy_(torch.rand(cache.shape, generator=gen))
    caches = [c.clone() for c in model.caches()]
    layout = lc.PagedCacheLayout(opts)
    layout.lens = [2, 1]
    inputs = layout.decode([5, 6])
    decode = lc.compile_step(model.decode, lc.compile_options("graph"))
    with torch.inference_mode():
        got = decode(inputs.input_ids, inputs.positions, inputs.slot_mapping, inputs.block_tables,
                     inputs.context_lens)

    # The C++ model on the same seed, the same cache contents and the same step inputs.
    graph = sk.cpp_models.build_longcat_flash(values, "decode", batch=2, block_size=4, max_context=8,
                                              prefill_tokens=4, seed=3)
    exe = sk.compile(graph, {"static_kernel_compile": True})
    for cache, name in zip(caches, sk.cpp_models.longcat_flash_cache_names(values)):
        exe.bind_variable(name, cache.numpy())
    for name in ("input_ids", "positions", "slot_mapping", "block_tables", "context_lens"):
        exe.set_input(name, getattr(inputs, name).numpy())
    exe.run()
    want = torch.from_numpy(exe.read("logits"))
    for a, b in zip(caches, model.caches()):
        assert torch.equal(a, b)  # both wrote the same latent rows
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_explain_shows_three_scopes_per_layer():
    case = Case("longcat_packed")
    # With the MoE on its own stream (the command-line test explains the single-stream model).
    for streams in (1,):
        model = lc.LongcatFlash.from_checkpoint(case.dir, options(case, multi_streams=streams))
        decode = lc.compile_step(model.decode, lc.compile_options("superkernel"))
        s = lc.PagedCacheLayout(model.options).decode([1])
        with torch.inference_mode():
            text = sk.explain(decode, s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.context_lens)
        for layer in range(model.config.num_layers):
            for part in ("part1", "part2_moe", "part2_main"):
                assert f"scope_{layer}_{part}" in text, (streams, layer, part, text)
        assert "scope_embed" in text and "scope_lm_head" in text
        assert "host step" not in text, text


def test_unread_and_missing_tensors_are_errors(tmp_path):
    from safetensors.torch import load_file, save_file

    case = Case("longcat_packed")
    tensors = load_file(f"{case.dir}/model.safetensors")
    (tmp_path / "config.json").write_text(open(f"{case.dir}/config.json").read())
    save_file(dict(tensors, **{"model.layers.9.extra.weight": torch.zeros(2)}), str(tmp_path / "model.safetensors"))
    with pytest.raises(sk.InvalidArgumentError, match="model.layers.9.extra.weight"):
        lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case))
    model = lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case, allow_unused_tensors=True))
    assert model.skipped_tensors == ["model.layers.9.extra.weight"]
    # The multi-token-prediction layer is skipped as transformers skips it.
    save_file(dict(tensors, **{"model.mtp.layers.0.weight": torch.zeros(2)}), str(tmp_path / "model.safetensors"))
    assert lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case)).skipped_tensors == [
        "model.mtp.layers.0.weight"]
    del tensors["model.norm.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(sk.NotFoundError, match="model.norm.weight"):
        lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case))


def test_sharded_bf16_checkpoint(tmp_path):
    """A checkpoint split over two files with an index, stored in bf16: read as the C++ loader
    reads it (converted to f32 on load), the same logits as the f32 model given the rounded
    weights."""
    import json

    from safetensors.torch import load_file, save_file

    case = Case("longcat_per_expert")
    tensors = {k: v.to(torch.bfloat16) for k, v in load_file(f"{case.dir}/model.safetensors").items()}
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for file, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(tmp_path / file))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: f for f, keys in shards.items() for k in keys}}))
    (tmp_path / "config.json").write_text(open(f"{case.dir}/config.json").read())
    sharded = lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case))
    # The same bf16-rounded weights in one f32 file: the same model, tensor for tensor.
    single = tmp_path / "single"
    single.mkdir()
    save_file({k: v.float() for k, v in tensors.items()}, str(single / "model.safetensors"))
    (single / "config.json").write_text(open(f"{case.dir}/config.json").read())
    unsharded = lc.LongcatFlash.from_checkpoint(str(single), options(case))
    a, b = sharded.state_dict(), unsharded.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert sharded.layers[0].mlp.gate_up_proj.dtype == torch.float32
    # bf16 weights stay bf16 when the model multiplies in bf16.
    bf16 = lc.LongcatFlash.from_checkpoint(str(tmp_path), options(case, weight_dtype="bf16"))
    assert torch.equal(bf16.layers[0].mlp.gate_up_proj.float(), sharded.layers[0].mlp.gate_up_proj)


def test_afd_ffn_model_matches_transformers_moe():
    """The FFN-only model: each layer's MoE chained, against transformers' own LongcatFlashMoE
    modules of the same checkpoint (zero-filled unused expert slots), f64; with prefetch of the
    next layer's weights on stream "prefetch" bit-identical to without, in every mode."""
    from transformers import LongcatFlashConfig as HFConfig
    from transformers import LongcatFlashForCausalLM

    from safetensors.torch import load_file

    case = Case("longcat_packed")
    hf_config = HFConfig.from_pretrained(case.dir)
    hf = LongcatFlashForCausalLM(hf_config).eval().double()
    state = load_file(f"{case.dir}/model.safetensors")
    full = hf.state_dict()
    for name, t in state.items():
        if name.endswith("experts.gate_up_proj"):
            padded = torch.zeros_like(full[name])
            padded[: t.shape[0]] = t
            t = padded
        full[name] = t.double()
    hf.load_state_dict(full)
    x = torch.rand([3, hf_config.hidden_size], generator=torch.Generator().manual_seed(0)) * 2 - 1
    want = x.double()
    with torch.no_grad():
        for layer in hf.model.layers:
            want = layer.mlp(want.unsqueeze(0))[0]
    outs = {}
    for mode, prefetch in (("eager", False), ("superkernel", False), ("superkernel", True)):
        opts = lc.BuildOptions(batch=3, enable_superkernel=mode == "superkernel", prefetch=prefetch,
                               multi_streams=2 if prefetch else 0)
        model = lc.LongcatFlashAfd.from_checkpoint(case.dir, opts)
        step = lc.compile_step(model.forward, lc.compile_options(mode))
        with sk.recording() as ran, torch.inference_mode():
            outs[(mode, prefetch)] = step(x)
        if mode == "superkernel":
            text = ran[0][0].explain()
            for i in range(model.config.num_layers):
                assert f"scope_{i}_moe" in text
        graph = ran[0][0].graph
        kernels = [graph.op(i).kernel for i in range(graph.num_ops)]
        # Each layer but the last warms the next one's router and gate/up weights.
        assert kernels.count("prefetch") == (2 * (model.config.num_layers - 1) if prefetch else 0)
    ref = outs[("eager", False)]
    for key, got in outs.items():
        assert torch.equal(got.view(torch.int32), ref.view(torch.int32)), key
    assert torch.allclose(ref.double(), want, atol=1e-4, rtol=1e-4), float((ref.double() - want).abs().max())


def test_build_option_errors():
    case = Case("longcat_packed")
    with pytest.raises(NotImplementedError, match="w8a8"):
        lc.LongcatFlash.from_checkpoint(case.dir, options(case, weight_dtype="w8a8"))
    with pytest.raises(ValueError, match="prefetch"):
        lc.LongcatFlashAfd.from_checkpoint(case.dir, lc.BuildOptions(prefetch=True))
