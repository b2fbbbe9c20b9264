"""Evaluation outputs: ``results.jsonl`` (resumable), ``metrics.json``, ``metrics.md``.

The ``--out`` folder holds:

* ``run.json``: what was evaluated (dataset, split, database, mode...). A rerun with
  the same folder must evaluate the same thing; it then skips the questions already
  in ``results.jsonl``.
* ``results.jsonl``: one JSON object per finished question, appended as soon as it
  finishes (id, question, status, answer, gold, verdict, correct, contained, code,
  error, note, template, tables, tokens, seconds).
* ``metrics.json``: the metrics (``ehr-magic eval --json`` prints the same object).
* ``metrics.md``: the metrics as markdown tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_magic.errors import EhrMagicError

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.eval.runner import EvalReport, QuestionResult

RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
METRICS_JSON = "metrics.json"
METRICS_MD = "metrics.md"
# Keys of run.json that must match for a run to resume in the same folder.
_IDENTITY = ("dataset", "split", "db", "mode", "memory_from", "grow_memory")


class ResultsStore:
    """The ``--out`` folder's ``results.jsonl``: finished questions, appended one by one."""

    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        self.directory = directory
        self.config = config
        self.path = directory / RESULTS_FILE

    def load(self) -> dict[str, QuestionResult]:
        """Check the folder belongs to this run (or create it) and read its finished questions."""
        from ehr_magic.eval.runner import QuestionResult

        if self.directory.exists() and not self.directory.is_dir():
            raise EhrMagicError(f"--out {self.directory} is a file; pass a folder for the results.")
        self.directory.mkdir(parents=True, exist_ok=True)
        run_file = self.directory / RUN_FILE
        if run_file.is_file():
            try:
                previous = json.loads(run_file.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                previous = {}
            changed = [k for k in _IDENTITY if previous.get(k) != self.config.get(k)]
            if changed and self.path.is_file():
                what = ", ".join(f"{k} {previous.get(k)!r}" for k in changed)
                raise EhrMagicError(f"--out {self.directory} holds results of another run ({what}); "
                                    "use another folder or delete it.")
        run_file.write_text(json.dumps(self.config, indent=2) + "\n", encoding="utf-8")
        done: dict[str, QuestionResult] = {}
        if not self.path.is_file():
            return done
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                    result = QuestionResult.from_json(record)
                except (json.JSONDecodeError, TypeError):
                    continue  # a line cut short by an interrupted run: that question runs again
                done[result.id] = result
        return done

    def append(self, result: QuestionResult) -> None:
        line = json.dumps(result.to_json(), ensure_ascii=False, default=str)
        with open(self.path, "a+b") as handle:
            handle.seek(0, 2)
            if handle.tell() > 0:  # start on a fresh line after an interrupted write
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            handle.write(line.encode("utf-8") + b"\n")
            handle.flush()


def write_outputs(directory: Path, report: EvalReport) -> list[Path]:
    """Write metrics.json and metrics.md (results.jsonl is written as questions finish)."""
    directory.mkdir(parents=True, exist_ok=True)
    metrics_json = directory / METRICS_JSON
    metrics_json.write_text(json.dumps(report.metrics, indent=2) + "\n", encoding="utf-8")
    metrics_md = directory / METRICS_MD
    metrics_md.write_text(render_markdown(report), encoding="utf-8")
    return [directory / RESULTS_FILE, metrics_json, metrics_md]


_HEADLINE = [
    ("n", "questions", "{:d}"),
    ("answered", "answered", "{:d}"),
    ("correct", "correct (answers + abstentions)", "{:d}"),
    ("sr", "SR: success rate %", "{:.2f}"),
    ("cr", "CR: completion rate %", "{:.2f}"),
    ("precision", "precision on answered %", "{:.2f}"),
    ("rs0", "RS(0)", "{:.2f}"),
    ("rs5", "RS(5)", "{:.2f}"),
    ("rs10", "RS(10)", "{:.2f}"),
    ("rsN", "RS(N)", "{:.2f}"),
    ("containment", "containment (EHRAgent) %", "{:.2f}"),
    ("llm_calls", "LLM calls", "{:d}"),
    ("prompt_tokens", "prompt tokens", "{:d}"),
    ("completion_tokens", "completion tokens", "{:d}"),
    ("cost", "estimated cost ($)", "{:.4f}"),
    ("seconds_per_question", "seconds per question (mean)", "{:.3f}"),
    ("median_seconds", "seconds per question (median)", "{:.3f}"),
    ("p95_seconds", "seconds per question (p95)", "{:.3f}"),
]


def format_value(value: Any, pattern: str = "{}") -> str:
    if value is None:
        return "-"
    try:
        return pattern.format(value)
    except (ValueError, TypeError):
        return str(value)


def render_markdown(report: EvalReport) -> str:
    config, metrics = report.config, report.metrics
    title = f"# ehr-magic eval: {config['mode']} on {config['split']}"
    lines = [title, "", f"Dataset `{config['dataset']}` ({config.get('version') or 'no version'}), "
             f"database `{config['db']}`."]
    if config.get("memory_from"):
        lines.append(f"Memory filled from split `{config['memory_from']}`"
                     + (", growing during the run." if config.get("grow_memory") else "."))
    lines += ["", "| metric | value |", "|---|---:|"]
    for key, label, pattern in _HEADLINE:
        lines.append(f"| {label} | {format_value(metrics.get(key), pattern)} |")
    lines += ["", "## Per number of tables", ""] + _group_table(metrics.get("per_tables", {}), "tables")
    lines += ["", "## Per template", ""] + _group_table(metrics.get("per_template", {}), "template")
    return "\n".join(lines) + "\n"


def _group_table(groups: dict[str, dict[str, Any]], name: str) -> list[str]:
    rows = [f"| {name} | n | answered | correct | SR % | precision % | RS(10) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for key, m in groups.items():
        label = key.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {label} | {m['n']} | {m['answered']} | {m['correct']} | {format_value(m['sr'], '{:.1f}')} "
                    f"| {format_value(m['precision'], '{:.1f}')} | {format_value(m['rs10'], '{:.1f}')} |")
    return rows


def summary_lines(report: EvalReport) -> list[str]:
    """A short plain-text summary for the terminal."""
    m, c = report.metrics, report.config
    lines = [
        f"{c['mode']} on {c['split']}: {m['n']} questions, {m['answered']} answered, {m['correct']} correct"
        + (f" ({report.resumed} from an earlier run)" if report.resumed else ""),
        f"  SR {m['sr']:.2f}%  CR {m['cr']:.2f}%  precision {format_value(m['precision'], '{:.2f}')}%  "
        f"containment {m['containment']:.2f}%",
        f"  RS(0) {m['rs0']:.2f}  RS(5) {m['rs5']:.2f}  RS(10) {m['rs10']:.2f}  RS(N) {m['rsN']:.2f}",
        f"  LLM calls {m['llm_calls']}  tokens {m['prompt_tokens']} in / {m['completion_tokens']} out  "
        f"cost ${m['cost']:.4f}  {m['seconds_per_question']:.3f} s/question  wall {report.wall_seconds:.1f} s",
    ]
    if m["failed"]:
        lines.append(f"  {m['failed']} questions failed (see results.jsonl for each error)")
    if report.files:
        lines.append("  wrote " + ", ".join(str(p) for p in report.files))
    return lines
