"""HTML and text views of progress, answers and failures (pure functions)."""

from __future__ import annotations

import html
import json
from typing import Any

import polars as pl

from ehr_magic.agent.steps import AgentResult

_PHASE_NAMES = {"examples": "memory", "knowledge": "knowledge", "code": "code", "run": "run", "debug": "debug"}


def esc(text: Any) -> str:
    return html.escape(str(text))


def progress_html(lines: list[str], streamed: str = "") -> str:
    body = "<br>".join(esc(line) for line in lines[-8:])
    code = f"<pre style='max-height:14em;overflow:auto;opacity:.75'>{esc(streamed[-3000:])}</pre>" if streamed else ""
    style = "font-family:var(--jp-code-font-family,monospace);font-size:90%"
    return f"<div class='ehr-magic-progress' style='{style}'>{body}{code}</div>"


def phase_line(phase: str, detail: str, elapsed: float) -> str:
    return f"[{elapsed:5.1f}s] {_PHASE_NAMES.get(phase, phase)} {detail}".rstrip()


def answer_html(value: Any) -> str:
    if isinstance(value, pl.LazyFrame):
        value = value.collect()
    if isinstance(value, pl.DataFrame):
        shown = value.head(50)
        more = " (first 50 shown)" if value.height > 50 else ""
        return f"<div><b>answer</b>: {value.height:,} rows x {value.width} columns{more}{shown._repr_html_()}</div>"
    if isinstance(value, pl.Series):
        return answer_html(value.to_frame())
    return f"<div><b>answer</b>: <code>{esc(_short(repr(value), 2000))}</code></div>"


def answer_text(value: Any) -> str:
    if isinstance(value, pl.LazyFrame):
        value = value.collect()
    if isinstance(value, pl.DataFrame):
        return f"answer: {value.height:,} rows x {value.width} columns\n{value}"
    return f"answer: {_short(repr(value), 2000)}"


def details_html(answer: Any, model: str) -> str:
    """Knowledge (collapsed), steps, tokens, time, model and the memory examples used."""
    result: AgentResult | None = answer.result
    parts = []
    if answer.source == "memory":
        substitutions = getattr(answer, "substitutions", None) or []
        if substitutions:  # an adapted cell: show what changed and the code that ran
            rows = "".join(f"<tr><td><code>{esc(new)}</code></td><td>&larr;</td><td><code>{esc(old)}</code></td></tr>"
                           for new, old in substitutions)
            parts.append(f"{esc(answer.message)}<table style='margin:.3em 0'>{rows}</table>"
                         f"<details open><summary>adapted code</summary><pre>{esc(answer.code)}</pre></details>")
        else:
            parts.append(f"{esc(answer.message)}<details><summary>code</summary><pre>{esc(answer.code)}</pre></details>")
    elif result is not None:
        parts.append(f"{len(result.steps)} step(s), {len(result.llm_calls)} model call(s), "
                     f"{result.prompt_tokens:,} prompt + {result.completion_tokens:,} completion tokens, "
                     f"{result.model_seconds:.1f} s model + {result.own_seconds:.2f} s ours, "
                     f"model {esc(model or result.model)}")
        if result.examples:
            parts.append("examples: " + esc(", ".join(result.examples)))
    body = "<br>".join(parts)
    if answer.source != "memory" and answer.code:
        body += code_block_html(answer.code)
    knowledge = answer.knowledge.strip()
    if knowledge:
        body += f"<details><summary>knowledge</summary><pre>{esc(knowledge)}</pre></details>"
    if result is not None and len(result.steps) > 1:
        attempts = "".join(
            f"<li>{esc(s.line())}"
            + (f"<br><i>debugger:</i> {esc(s.debugger_note)}" if s.debugger_note else "") + "</li>"
            for s in result.steps)
        body += f"<details><summary>attempts</summary><ul>{attempts}</ul></details>"
    return f"<div style='font-size:85%;opacity:.8'>{body}</div>"


def details_text(answer: Any) -> str:
    """Steps and model calls, and each step that did not answer: looked up, or failed."""
    steps = answer.result.steps
    lines = [f"{len(steps)} steps, {answer.model_calls} model calls"]
    if len(steps) > 1:
        lines += [s.line() for s in steps]
    return "\n".join(lines)


def code_block_html(code: str) -> str:
    """The code with a copy button, for front ends that do not insert cells (set_next_input)."""
    literal = json.dumps(code).replace("<", "\\u003c").replace("'", "\\u0027")
    return (f"<details><summary>code</summary>"
            f"<button onclick='navigator.clipboard.writeText({esc(literal)})'>copy</button>"
            f"<pre>{esc(code)}</pre></details>")


def failure_html(answer: Any) -> str:
    titles = {"failed": "Could not answer", "clarify": "The assistant needs a clarification",
              "abstained": "This database cannot answer that", "interrupted": "Interrupted"}
    title = titles.get(answer.status, answer.status)
    message = answer.message or ""
    code = f"<details><summary>last code</summary><pre>{esc(answer.code)}</pre></details>" if answer.code else ""
    return (f"<div class='ehr-magic-failure'><b>{esc(title)}</b> ({esc(answer.status)})"
            f"<pre style='white-space:pre-wrap'>{esc(_short(message, 3000))}</pre>{code}</div>")


def reuse_text(answer: Any) -> str:
    """Plain-text view of a memory answer: the message, and the adapted code when values changed."""
    if getattr(answer, "substitutions", None):
        return f"{answer.message}\nadapted code:\n{answer.code}"
    return answer.message


def failure_text(answer: Any) -> str:
    text = f"{answer.status}: {_short(answer.message, 3000)}"
    if answer.code:
        text += "\nlast code:\n" + answer.code
    return text


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."
