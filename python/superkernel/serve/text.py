"""Text in and out for the server: prompts through the checkpoint's tokenizer and chat template
(rendered by transformers, as ``apply_chat_template`` renders it), and streamed output decoded
incrementally with stop strings found across token boundaries.

    stream = TextStream(tokenizer, stop=["\\n\\n"])
    for token in tokens:
        piece, stopped = stream.push(token)   # the text that became final, and whether a stop hit
    tail = stream.flush()                      # what was held back, once the sequence ended
"""

from __future__ import annotations


class TextStream:
    """Decodes a growing list of token ids. Text is released only once it is final: a partial
    multi-byte character (the tokenizer's U+FFFD) waits for its next token, and a suffix that
    could still become a stop string is held until it cannot. When a stop string appears, the
    text before it is released and the stream stops (the stop string itself is not output, as
    OpenAI's API does)."""

    def __init__(self, tokenizer, stop: list[str] | None = None):
        self.tokenizer = tokenizer
        self.stop = [s for s in (stop or []) if s]
        self.ids: list[int] = []
        self.sent = 0  # characters of the decoded text already released
        self.text = ""
        self.stopped = False

    def _decode(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def push(self, token: int) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        self.ids.append(token)
        text = self._decode()
        if text.endswith("\ufffd"):
            return "", False
        self.text = text
        hit = self._first_stop(text)
        if hit is not None:
            piece = text[self.sent:hit]
            self.sent = hit
            self.stopped = True
            return piece, True
        keep = self._held_suffix(text)
        end = max(self.sent, len(text) - keep)
        piece = text[self.sent:end]
        self.sent = end
        return piece, False

    def flush(self) -> str:
        """The text still held back (a partial stop string at the end, an unfinished character)."""
        if self.stopped:
            return ""
        text = self._decode()
        piece = text[self.sent:]
        self.sent = len(text)
        self.text = text
        return piece

    def _first_stop(self, text: str) -> int | None:
        longest = max((len(s) for s in self.stop), default=0)
        start = max(0, self.sent - longest + 1)
        hits = [i for i in (text.find(s, start) for s in self.stop) if i >= 0]
        return min(hits) if hits else None

    def _held_suffix(self, text: str) -> int:
        """Length of the longest suffix of text that is a proper prefix of a stop string."""
        keep = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(text)), keep, -1):
                if text.endswith(s[:n]):
                    keep = n
                    break
        return keep


def render_chat(tokenizer, messages: list[dict]) -> list[int]:
    """The prompt ids of a chat: the checkpoint's chat template with the generation prompt."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]
