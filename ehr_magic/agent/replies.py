"""Reading a model reply: code, knowledge bullets, a clarifying question or an abstention."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_MARKER = re.compile(r"^\s*(CLARIFY|UNANSWERABLE|CANNOT_ANSWER|ABSTAIN)\s*:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_STANDALONE = re.compile(r"^\s*\**standalone question\**\s*:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_KNOWLEDGE = re.compile(r"knowledge\s*:\s*\n(.*?)(?=```|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Reply:
    kind: Literal["code", "clarify", "abstain", "none"]
    code: str = ""
    knowledge: str = ""
    message: str = ""
    standalone: str = ""  # the question the code answers, stated by the model for a follow-up


def standalone_question(text: str) -> str:
    """The ``Standalone question:`` line of a reply, or "" without one."""
    match = _STANDALONE.search(text or "")
    return match.group(1).strip().strip("`").strip() if match else ""


def parse_reply(text: str) -> Reply:
    """Classify a reply. Code wins over markers only when no marker opens the reply."""
    text = text or ""
    standalone = standalone_question(text)
    knowledge_match = _KNOWLEDGE.search(text)
    knowledge = knowledge_match.group(1).strip() if knowledge_match else ""
    blocks = [b.strip() for b in _FENCE.findall(text) if b.strip()]
    marker = _MARKER.search(text)
    if marker and (not blocks or text.strip().upper().startswith(marker.group(1).upper())):
        kind: Literal["clarify", "abstain"] = "clarify" if marker.group(1).upper() == "CLARIFY" else "abstain"
        return Reply(kind, message=marker.group(2).strip(), knowledge=knowledge, standalone=standalone)
    if blocks:
        # The longest block is the program; shorter ones are usually illustrations.
        code = max(blocks, key=len)
        code = re.sub(r"\n?\s*TERMINATE\s*$", "", code).rstrip()
        return Reply("code", code=code, knowledge=knowledge, standalone=standalone)
    bare = _bare_code(text)
    if bare:
        return Reply("code", code=bare, knowledge=knowledge, standalone=standalone)
    return Reply("none", knowledge=knowledge, message=text.strip()[:500])


def _bare_code(text: str) -> str:
    """A reply that is a program without its fence (small local models often drop it):
    accepted when it parses as Python and sets ``answer``."""
    lines = [line for line in text.strip().splitlines()
             if not _STANDALONE.match(line) and not line.lower().startswith("knowledge:")]
    candidate = "\n".join(lines).strip()
    if "answer" not in candidate:
        return ""
    try:
        tree = ast.parse(candidate)
    except SyntaxError:
        return ""
    sets_answer = any(isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(
        isinstance(target, ast.Name) and target.id == "answer"
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]))
        for node in ast.walk(tree))
    return candidate if sets_answer else ""
