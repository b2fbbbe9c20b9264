"""``--mode agent`` end to end: the real agent, the fake model server over HTTP, and
metrics computed from what actually happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ehr_magic
from datapaths import EHRSQL_DIR
from ehr_magic.eval import evaluate, load_split
from ehr_magic.eval.sqlite_dialect import translator_for
from fake_llm import messages_text


@pytest.fixture()
def slice_dir(tmp_path: Path) -> Path:
    """Five answerable and two unanswerable valid questions."""
    valid = EHRSQL_DIR / "valid"
    data = json.loads((valid / "data.json").read_text())["data"]
    labels = json.loads((valid / "label.json").read_text())
    answers = json.loads((valid / "answer.json").read_text())
    chosen = [q for q in data if labels[q["id"]] != "null"][:5] + [q for q in data if labels[q["id"]] == "null"][:2]
    folder = tmp_path / "slice" / "s"
    folder.mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({"version": "slice", "data": chosen}))
    (folder / "label.json").write_text(json.dumps({q["id"]: labels[q["id"]] for q in chosen}))
    (folder / "answer.json").write_text(json.dumps({q["id"]: answers[q["id"]] for q in chosen}))
    return tmp_path / "slice"


def test_agent_mode_metrics_follow_what_happened(fake_llm, ehrsql_db: Path, slice_dir: Path) -> None:
    split = load_split(slice_dir, "s")
    with ehr_magic.connect(ehrsql_db) as ehr:
        translate = translator_for(ehr).translate
        gold = {item.question: translate(item.gold_sql) for item in split if item.gold_sql}
    questions = [item.question for item in split]
    answerable = [q for q in questions if q in gold]
    wrong_one, failing_one = answerable[0], answerable[1]

    def responder(request: dict[str, Any]) -> str:
        text = messages_text(request)
        if "rubber-duck debugger" in text:
            return "There is no such table."
        question = request["messages"][-1]["content"].rsplit("Question:", 1)[-1].strip()
        if question == wrong_one:
            return "```python\nanswer = ehr.sql('SELECT 12345').item()\n```"
        if question == failing_one:
            return "```python\nanswer = ehr.sql('SELECT * FROM missing_table')\n```"
        if question in gold:
            return f'Knowledge:\n- from the gold\n```python\nanswer = ehr.sql("""{gold[question]}""")\n```'
        return "UNANSWERABLE: this is not recorded in the database."

    fake_llm.responder = responder
    report = evaluate(slice_dir, "s", ehrsql_db, mode="agent", options={"max_steps": 2, "shots": 2})
    m = report.metrics
    assert m["n"] == 7
    assert m["correct"] == 5  # 3 right answers + 2 correct abstentions
    assert m["answered"] == 4  # 3 right + 1 wrong; the failing one did not answer
    assert m["rs0"] == pytest.approx(5 / 7 * 100)
    assert m["rs10"] == pytest.approx((5 - 10) / 7 * 100)
    assert m["precision"] == pytest.approx(75.0)
    requests = fake_llm.chat_requests()
    # 7 first calls, + 1 debugger + 1 second attempt for the failing question.
    assert m["llm_calls"] == len(requests) == 9
    # Token totals are the sums of what the server reported per call (as the audit log recorded it).
    from ehr_magic.llm import AuditLog

    logged = AuditLog().entries()
    assert len(logged) == 9
    assert m["prompt_tokens"] == sum(e.prompt_tokens for e in logged) > 0
    assert m["completion_tokens"] == sum(e.completion_tokens for e in logged) > 0
