"""The token sampler the command line and the server share: the library's sample kernel called
directly (temperature 0: argmax), so every mode, and a request alone or batched, draws the same ids.

    sampler = Sampler(temperature=0.8, top_k=0, top_p=0.95, seed=3)
    ids = sampler(logits)   # logits [B, V] f32 -> one id per row; each call advances the step
"""

from __future__ import annotations


class Sampler:
    """The library's sample kernel (temperature 0: argmax), so every mode draws the same ids."""

    def __init__(self, temperature: float, top_k: int, top_p: float, seed: int):
        import torch

        from . import _kernel_ops

        self.temperature, self.top_k, self.top_p, self.seed = temperature, top_k, top_p, seed
        self.step = 0
        self._step = torch.zeros([1], dtype=torch.int64)
        # What torch.ops.superkernel.sample runs, called directly: the op's dispatch and argument
        # binding cost about 20 us of a sampler call's ~45 at every token.
        self._signature = _kernel_ops.registered()["sample"]
        self._run = _kernel_ops.run_kernel_eagerly

    def __call__(self, logits) -> list[int]:
        self._step[0] = self.step
        self.step += 1
        args = {"logits": logits.contiguous(), "step": self._step, "seed": self.seed,
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        return self._run(self._signature, args).tolist()

    def advance(self) -> None:
        """Counts a draw made elsewhere (a greedy row argmaxed with others), so the next draw's
        step is the one it would have had."""
        self.step += 1
