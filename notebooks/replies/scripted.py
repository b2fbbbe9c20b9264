"""A scripted model for the notebooks: replies chosen by the question being asked.

Each ``<notebook>.yaml`` beside this file scripts the model for one notebook, as a list
of questions::

    - question: What was the last creatinine result of ...?
      replies:                  # one per code call, in order
        - |                     # a plain reply
          Knowledge:
          - ...
          ```python
          ...
          ```
        - when: "'CREATININE' does not occur"   # served only if the feedback says this
          reply: |
            ...
      debugger: |               # the rubber-duck debugger's note after a failed step
        ...

``ScriptedModel`` is a ``responder`` for ``tests/fake_llm.FakeLLMServer``. It never
raises: a request it cannot answer gets a one-line ``UNANSWERABLE`` reply (so the
notebook goes on) and is listed by ``problems()``, together with scripted replies
that were never asked for, so the harness can fail the notebook with a clear reason.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)
_DEBUGGER_MARK = "rubber-duck debugger"


@dataclass
class _Step:
    reply: str
    when: str | None = None


@dataclass
class _Script:
    question: str
    steps: list[_Step]
    debugger: str | None = None
    served: int = 0
    debugged: int = 0
    problems: list[str] = field(default_factory=list)


def script_path(notebook: str | Path) -> Path:
    """The reply script of a notebook (``quickstart.ipynb`` -> ``replies/quickstart.yaml``)."""
    return HERE / f"{Path(notebook).stem}.yaml"


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


class ScriptedModel:
    """Answers chat requests from a reply script; see the module docstring."""

    def __init__(self, items: list[dict[str, Any]], name: str = "script") -> None:
        self.name = name
        self.scripts: list[_Script] = []
        for item in items:
            steps = [_Step(s) if isinstance(s, str) else _Step(s["reply"], s.get("when")) for s in item["replies"]]
            self.scripts.append(_Script(item["question"], steps, item.get("debugger")))
        self.unknown: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def for_notebook(cls, notebook: str | Path) -> ScriptedModel:
        """The notebook's script; a notebook without one must not call the model at all."""
        path = script_path(notebook)
        items = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else []
        return cls(items or [], name=path.name)

    def __call__(self, request_json: dict[str, Any]) -> str:
        messages = request_json.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        asked = _QUESTION.findall(users[0]) if users else []
        if not asked:
            return self._refuse("a request without a 'Question:' line")
        with self._lock:
            if _DEBUGGER_MARK in system:
                return self._debugger(asked[0].strip())
            # the last "Question:" of the first user message is the new one (examples come first)
            return self._code(asked[-1].strip(), feedback=users[-1] if len(users) > 1 else "")

    def _find(self, question: str) -> _Script | None:
        return next((s for s in self.scripts if _same(s.question, question)), None)

    def _code(self, question: str, feedback: str) -> str:
        script = self._find(question)
        if script is None:
            return self._refuse(f"unscripted question {question!r}")
        if script.served >= len(script.steps):
            return self._refuse(f"{question!r} was asked more often than scripted ({len(script.steps)}x)")
        step = script.steps[script.served]
        script.served += 1
        if step.when is not None and step.when not in feedback:
            script.problems.append(f"{question!r}: reply {script.served} expects {step.when!r} in the feedback, "
                                   f"which was: {feedback[:300]!r}")
            return "UNANSWERABLE: the scripted fix expects other feedback."
        return step.reply

    def _debugger(self, question: str) -> str:
        script = self._find(question)
        if script is None or script.debugger is None:
            return self._refuse(f"no debugger note scripted for {question!r}")
        script.debugged += 1
        return script.debugger

    def _refuse(self, why: str) -> str:
        self.unknown.append(why)
        return f"UNANSWERABLE: {why} ({self.name})."

    def problems(self) -> list[str]:
        """Everything that did not go as scripted; empty when the notebook ran as written."""
        found = list(self.unknown)
        for s in self.scripts:
            found += s.problems
            if s.served < len(s.steps):
                found.append(f"{s.question!r}: {len(s.steps) - s.served} scripted reply(ies) never asked for")
            if s.debugger is not None and s.debugged == 0:
                found.append(f"{s.question!r}: the debugger note was never asked for")
        return found
