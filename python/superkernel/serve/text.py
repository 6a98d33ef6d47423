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
        self.text = ""  # the decoded text so far
        self.stopped = False
        # Decoding only a window of the ids: [prefix, read) are the tokens of the text's tail that
        # a new token may still change (a word piece, a byte of a character), decoded again with
        # the new ones; the text before them is final. Keeps a token's cost independent of the
        # sequence's length.
        self._prefix = self._read = 0

    def _advance(self) -> bool:
        """Appends what the tokens since `read` add to the text; False while they add nothing
        final (an unfinished character, a token that decodes to nothing)."""
        prefix = self.tokenizer.decode(self.ids[self._prefix:self._read], skip_special_tokens=True)
        new = self.tokenizer.decode(self.ids[self._prefix:], skip_special_tokens=True)
        if new.endswith("\ufffd") or len(new) <= len(prefix):
            return False
        self.text += new[len(prefix):]
        self._prefix, self._read = self._read, len(self.ids)
        return True

    def push(self, token: int) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        self.ids.append(token)
        if not self._advance():
            return "", False
        text = self.text
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
        if self._read < len(self.ids):
            prefix = self.tokenizer.decode(self.ids[self._prefix:self._read], skip_special_tokens=True)
            new = self.tokenizer.decode(self.ids[self._prefix:], skip_special_tokens=True)
            self.text += new[len(prefix):]
            self._prefix = self._read = len(self.ids)
        piece = self.text[self.sent:]
        self.sent = len(self.text)
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
