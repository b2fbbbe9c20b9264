"""Token estimates for servers that report no usage."""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Sequence

_TOKEN_PIECES = re.compile(r"[A-Za-z]{1,8}|\d{1,3}|[^\sA-Za-z\d]|\s{2,}")


@functools.lru_cache(maxsize=1024)  # a prompt weighs the same system message and tables in several forms
def estimate_tokens(text: str) -> int:
    """Cheap token estimate for servers that report no usage.

    Counts letter runs (split every 8 letters), digit groups of 3, each symbol and each
    run of 2+ spaces: close to BPE counts for English and code, slightly high rather
    than low.
    """
    if not text:
        return 0
    return max(1, len(_TOKEN_PIECES.findall(text)))


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """``estimate_tokens`` over the messages plus the chat format's per-message overhead."""
    total = 3
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        total += 4 + estimate_tokens(str(content or ""))
    return total
