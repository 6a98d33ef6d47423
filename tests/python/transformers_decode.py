"""Greedy decoding of a transformers causal LM with a static KV cache, eager against the
superkernel backend (shared by the Llama and MoE tests)."""

import torch
from transformers import StaticCache

import superkernel as sk
from conftest import MODES, bits

PROMPT = [[1, 5, 9, 3]]
STEPS = 16
CACHE_LEN = 32
OPTIONS = {**MODES["superkernel"], "frozen_parameter": True}


def greedy(model, config, record=False, prompt_at_once=True):
    """Prompt (at once, or token by token through the decode graph), then STEPS greedy tokens;
    returns (ids, logits of each step, what ran)."""
    cache = StaticCache(config=config, max_cache_len=CACHE_LEN)
    ids, logits_seen = [], []
    with torch.no_grad(), sk.recording(snapshot=record) as ran:
        if prompt_at_once:
            logits = model(torch.tensor(PROMPT), cache=cache, use_cache=True).logits
        else:
            for token in PROMPT[0]:
                logits = model(torch.tensor([[token]]), cache=cache, use_cache=True).logits
        for _ in range(STEPS):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            ids.append(int(nxt))
            logits_seen.append(logits[:, -1])
            logits = model(nxt, cache=cache, use_cache=True).logits
    return ids, logits_seen, ran


def check_model(model, config, tol, prompt_at_once=True, replay=False):
    """Greedy ids equal eager; returns the two compiled graphs (the first call's and the decode
    step's). With replay, the same compiled model also passes check_replay's test (one compile
    for both: compiling is most of these tests' time)."""
    torch._dynamo.reset()
    want_ids, want_logits, _ = greedy(model, config, prompt_at_once=prompt_at_once)
    compiled = torch.compile(model, backend="superkernel", options=OPTIONS, fullgraph=True, dynamic=False)
    got_ids, got_logits, ran = greedy(compiled, config, record=True, prompt_at_once=prompt_at_once)
    same = next((i for i, (g, w) in enumerate(zip(got_ids, want_ids)) if g != w), len(want_ids))
    if same < len(want_ids):
        # The sequences may part only at a tie within the dtype's tolerance: eager's top two logits
        # there are closer than tol (a 16-bit rounding may pick either); after it they differ.
        top2 = want_logits[same].float().topk(2, dim=-1).values[0]
        assert float(top2[0] - top2[1]) < tol, (same, got_ids, want_ids, top2)
    for g, w in zip(got_logits[:same + 1], want_logits[:same + 1]):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)
    graphs = []
    for g, _ in ran:
        if all(g is not h for h in graphs):
            graphs.append(g)
    # The first call (the cache allocates its tensors) and the next ones: no recompiles per step.
    assert len(graphs) == 2, [g.graph.num_ops for g in graphs]
    # The decode step replayed in every mode from the same inputs: bit-identical logits.
    decode, args = ran[-1]
    outs = {}
    for mode in MODES:
        # Frozen parameters and buffers stay as they are: the graph holds their storage.
        inputs = [a.clone() if isinstance(a, torch.Tensor) and i not in decode.frozen_inputs else a
                  for i, a in enumerate(args)]
        outs[mode] = [bits(t) for t in decode.with_options({**MODES[mode]})(*inputs) if isinstance(t, torch.Tensor)]
    for mode in ("eager", "graph"):
        assert all(torch.equal(a, b) for a, b in zip(outs[mode], outs["superkernel"])), mode
    if replay:
        _replay_matches_calls(compiled, config)
    return graphs


def check_replay(model, config):
    """The decode step captured once (superkernel.capture) and replayed with each greedy token
    written into the captured input: the compiled calls' ids and logits, bit for bit."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="superkernel", options=OPTIONS, fullgraph=True, dynamic=False)
    _replay_matches_calls(compiled, config)


def _replay_matches_calls(compiled, config):
    want_ids, want_logits, _ = greedy(compiled, config)
    cache = StaticCache(config=config, max_cache_len=CACHE_LEN)
    ids, logits_seen = [], []
    with torch.no_grad():
        logits = compiled(torch.tensor(PROMPT), cache=cache, use_cache=True).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        step = None
        for _ in range(STEPS):
            ids.append(int(token))
            logits_seen.append(logits[:, -1].clone())
            if step is None:
                step = sk.capture(lambda t: compiled(t, cache=cache, use_cache=True), token)
            else:
                step.inputs[0].copy_(token)
                step()
            logits = step.result.logits
            token = logits[:, -1].argmax(-1, keepdim=True)
    assert ids == want_ids
    for got, want in zip(logits_seen, want_logits):
        assert torch.equal(bits(got), bits(want))
