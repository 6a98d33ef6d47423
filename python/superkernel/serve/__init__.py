"""``python -m superkernel serve CONFIG``: an OpenAI-compatible HTTP server with continuous
batching over a model's paged KV cache (docs/SERVING.md).

- engine.py: the scheduler (requests into sequence rows, chunked prefill, one batched decode
  launch per step, sampling) -- no HTTP.
- text.py: prompts through the checkpoint's tokenizer and chat template, streamed text with stop
  strings across token boundaries.
- http.py: the routes (FastAPI), request validation, server-sent events, /metrics.
"""

from .engine import DoneEvent, Engine, Overloaded, Request, SamplingParams, TokenEvent, TorchSteps
from .text import TextStream, render_chat

__all__ = ["Engine", "TorchSteps", "SamplingParams", "Request", "TokenEvent", "DoneEvent", "Overloaded", "TextStream",
           "render_chat"]
