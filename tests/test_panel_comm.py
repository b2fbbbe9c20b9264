"""The side panel's comm handler (protocol v2, and v1 requests): every request type, malformed input,
and the same conversation over a real ipykernel.

Most tests drive the handler through fake comm objects on a real InteractiveShell
with a real DuckDB database and the fake model server; one test starts a real kernel
and speaks the Jupyter messaging protocol to it, as JupyterLab does.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import types
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ehr_magic.magic.command import read_marker
from ehr_magic.memory import MemoryStore
from ehr_magic.panel import TARGET, register_comm_target
from ehr_magic.panel import protocol as p
from ehr_magic.panel.handler import EventStream, PanelHandler
from test_magic import ipython_shell

COUNT_CODE = "patients = ehr.sql('SELECT count(*) AS n FROM patients')\nanswer = patients.item()"
CELL_CODE = COUNT_CODE + "\nanswer"  # as the session offers it (panel and magic alike): the last line shows the answer
GENDER_CODE = "answer = ehr.sql('SELECT gender, count(*) AS n FROM patients GROUP BY gender ORDER BY gender')"
BAD_CODE = "answer = ehr.sql('SELECT * FROM nope')"


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


class FakeCommManager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, f: Any) -> None:
        self.targets[name] = f

    def unregister_target(self, name: str, f: Any) -> None:
        del self.targets[name]


class FakeComm:
    """What ipykernel's Comm offers the handler: send() and on_msg()."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.callback: Any = None

    def send(self, data: Any) -> None:
        self.sent.append(json.loads(json.dumps(data, allow_nan=False)))  # must be strict JSON

    def on_msg(self, callback: Any) -> None:
        self.callback = callback

    def deliver(self, data: Any) -> list[dict[str, Any]]:
        """Send ``data`` as the panel would; returns the messages the kernel sent back."""
        before = len(self.sent)
        self.callback({"content": {"comm_id": "c1", "data": data}})
        return self.sent[before:]


class Panel:
    """A minimal panel: numbered requests, replies split into events and the reply."""

    def __init__(self, comm: FakeComm, magics: Any = None, version: int = 1) -> None:
        self.comm = comm
        self.magics = magics
        self.n = 0
        self.version = version

    def call(self, kind: str, **params: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        self.n += 1
        rid = f"r{self.n}"
        out = self.comm.deliver({"v": self.version, "id": rid, "type": kind, "params": params})
        assert all(m["id"] == rid and m["v"] == self.version for m in out), out
        events = [m["event"] for m in out if m["kind"] == "event"]
        replies = [m for m in out if m["kind"] in ("result", "error")]
        assert len(replies) == 1 and out[-1] is replies[0], out  # exactly one reply, last
        return events, replies[0]

    def result(self, kind: str, **params: Any) -> dict[str, Any]:
        _, reply = self.call(kind, **params)
        assert reply["kind"] == "result", reply
        assert reply["type"] == kind
        return reply["result"]

    def error(self, kind: str, **params: Any) -> dict[str, Any]:
        _, reply = self.call(kind, **params)
        assert reply["kind"] == "error", reply
        return reply["error"]


@pytest.fixture()
def ip(ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(ehrsql_db, monkeypatch, tmp_path,
                             kernel=types.SimpleNamespace(comm_manager=FakeCommManager()))


@pytest.fixture()
def panel(ip) -> Panel:
    comm = FakeComm()
    ip.kernel.comm_manager.targets[TARGET](comm, {"content": {"data": {}}})
    return Panel(comm, ip._ehr_magic[0])


def memory(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory.sqlite")


# -- opening ----------------------------------------------------------------------------


def test_load_ext_registers_target_and_greets_with_protocol_version(ip, panel) -> None:
    assert TARGET in ip.kernel.comm_manager.targets
    hello = panel.comm.sent[0]
    assert hello["kind"] == "hello" and hello["protocol"] == 2 and hello["protocols"] == [1, 2]
    assert "ask" in hello["types"] and "knowledge.import" in hello["types"]
    assert panel.result("hello")["protocol"] == 2  # a v1 request is still served, answered in v1


def test_reload_ext_serves_open_panels_with_the_new_session(ip, panel) -> None:
    old = ip._ehr_magic[0]
    ip.run_line_magic("reload_ext", "ehr_magic")
    assert ip._ehr_magic[0] is not old
    assert panel.result("status")["database"]["schema"] == "ehrsql_mimic_iv"  # old session's ehr is closed


def test_no_kernel_no_target() -> None:
    shell = types.SimpleNamespace()  # e.g. a terminal IPython: nothing to register on
    assert register_comm_target(shell, object()) is False


# -- status -----------------------------------------------------------------------------


def test_status_reports_database_model_memory_privacy(panel, fake_llm) -> None:
    status = panel.result("status")
    assert status["database"]["schema"] == "ehrsql_mimic_iv"
    assert status["database"]["tables"] > 5 and status["database"]["now"].startswith("2100")
    assert status["model"] == {"configured": True, "name": "fake-model", "endpoint": fake_llm.base_url,
                               "provider": "compatible"}
    assert status["memory"]["total"] == 0 and status["memory"]["accepted"] == 0
    assert status["privacy"] == "full"  # an open dataset's default
    assert status["settings"]["steps"] == 10


def test_status_privacy_is_the_sessions(panel) -> None:
    """The panel shows the level the session answers with: the magic's setting, else the default."""
    panel.magics.privacy = "aggregates"
    try:
        assert panel.result("status")["privacy"] == "aggregates" == panel.magics.session.privacy_level()
    finally:
        panel.magics.privacy = None
    assert panel.result("status")["privacy"] == "full"


def test_status_without_model_says_what_to_set(panel) -> None:
    model = panel.result("status")["model"]
    assert model["configured"] is False and "EHR_MAGIC_MODEL" in model["error"]


# -- ask --------------------------------------------------------------------------------


def test_ask_streams_events_and_returns_marked_code(ip, panel, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    events, reply = panel.call("ask", question="How many patients are there?")
    result = reply["result"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "phase" and events[0]["phase"] == "examples"
    assert "examples" in kinds and "token" in kinds and kinds[-1] == "step"
    assert [e["phase"] for e in events if e["kind"] == "phase"] == ["examples", "code", "run"]
    assert "".join(e["text"] for e in events if e["kind"] == "token") == fenced(COUNT_CODE)
    assert all(isinstance(e["elapsed"], (int, float)) for e in events)
    assert result["status"] == "answered" and result["source"] == "agent"
    assert result["answer"] == {"kind": "value", "value": 94, "type": "int"}
    token, question, code = read_marker(result["code"])
    assert token == result["token"] and question == "How many patients are there?"
    assert code.strip() == CELL_CODE == result["raw_code"]
    assert result["steps"][0]["succeeded"] and result["steps"][0]["error"] is None
    assert result["model"] == "fake-model" and result["llm_calls"] == 1 and result["prompt_tokens"] > 0
    assert result["examples"] and all(e["origin"] in ("seed", "memory") for e in result["examples"])
    assert result["examples"][0]["question"]

    # the panel inserts and runs the cell: the post-run hook accepts it
    assert panel.result("pending", token=token)["accepted"] is False
    assert ip.run_cell(result["code"]).success
    pending = panel.result("pending", token=token)
    assert pending["accepted"] is True and pending["origin"] == "accepted"
    (entry,) = memory(tmp_path).list()
    assert entry.id == pending["entry_id"] and entry.code == CELL_CODE and entry.origin == "accepted"
    assert panel.result("status")["memory"]["accepted"] == 1

    # the same question again: answered from memory, no model call; regenerate asks the model
    result = panel.result("ask", question="How many patients are there?")
    assert result["source"] == "memory" and result["answer"]["value"] == 94 and result["entry_id"] == entry.id
    assert read_marker(result["code"])[2].strip() == CELL_CODE
    assert len(fake_llm.chat_requests()) == 1
    fake_llm.enqueue(fenced("answer = ehr.count('patients')"))
    result = panel.result("ask", question="How many patients are there?", regenerate=True)
    assert result["source"] == "agent" and "ehr.count" in result["code"]
    assert len(fake_llm.chat_requests()) == 2


def test_ask_shows_each_attempt_error_debugger_note_and_table(panel, fake_llm) -> None:
    fake_llm.enqueue(fenced(BAD_CODE), "There is no table nope; count patients by gender instead.",
                     fenced(GENDER_CODE))
    events, reply = panel.call("ask", question="How many patients per gender?")
    result = reply["result"]
    assert [e["phase"] for e in events if e["kind"] == "phase"] == [
        "examples", "code", "run", "debug", "code", "run"]
    first, second = result["steps"]
    assert not first["succeeded"] and "nope" in first["error"]
    assert first["debugger_note"].startswith("There is no table nope")
    assert second["succeeded"] and second["index"] == 2
    steps = [e["step"] for e in events if e["kind"] == "step"]
    assert [s["index"] for s in steps] == [1, 2]
    answer = result["answer"]
    assert answer["kind"] == "table" and answer["columns"] == ["gender", "n"]
    assert [r[0] for r in answer["rows"]] == ["f", "m"] and sum(r[1] for r in answer["rows"]) == 94
    assert answer["total_rows"] == 2 and answer["truncated"] is False
    assert "2 rows" in result["answer_text"]


def test_ask_shows_a_look_up_as_looked_up_not_failed(panel, fake_llm) -> None:
    # Issue 23: code that only prints what it looked up is an observation, not a failed attempt.
    fake_llm.enqueue(fenced("print(ehr.describe('patients'))"), fenced(GENDER_CODE))
    events, reply = panel.call("ask", question="How many patients per gender?")
    first, second = reply["result"]["steps"]
    assert first["outcome"] == "looked up" and "gender" in first["observation"]
    assert not first["succeeded"] and first["error"] is None and first["soft_failure"] is None
    assert second["outcome"] == "answered" and second["succeeded"]
    assert "debug" not in [e["phase"] for e in events if e["kind"] == "phase"]
    assert reply["result"]["status"] == "answered" and not reply["result"]["message"]


@pytest.mark.parametrize("reply, status", [
    ("CLARIFY: Which hospital visit do you mean?", "clarify"),
    ("UNANSWERABLE: addresses are not recorded here.", "abstained"),
])
def test_ask_clarify_and_abstain_have_no_code(panel, fake_llm, reply, status) -> None:
    fake_llm.enqueue(reply)
    result = panel.result("ask", question="Where does patient 10000032 live?")
    assert result["status"] == status and result["token"] is None and result["code"] == ""
    assert result["message"] and result["answer"] == {"kind": "none"}


def test_ask_failed_after_all_steps(panel, fake_llm, ip) -> None:
    ip.run_line_magic("config", "EhrMagics.steps = 2")
    fake_llm.responder = lambda req: "Use an existing table." if "rubber-duck" in str(req) else fenced(BAD_CODE)
    result = panel.result("ask", question="What is in nope?")
    assert result["status"] == "failed" and len(result["steps"]) == 2 and result["token"] is None
    assert "nope" in result["message"]


def test_ask_without_model_is_a_user_error(panel) -> None:
    error = panel.error("ask", question="How many admissions are there?")
    assert error["code"] == "user_error" and "EHR_MAGIC_MODEL" in error["message"]


def test_interrupt_during_ask_is_an_error_reply(ip, panel, monkeypatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ip._ehr_magic[0].session, "ask", interrupted)
    error = panel.error("ask", question="Slow?")
    assert error["code"] == "interrupted"
    # the session records it, for the panel as for the magic: interrupted, not an error
    assert ip._ehr_magic[0].session.cells.history[-1].status == "interrupted"
    assert "_examples" not in vars(ip._ehr_magic[0].session)  # nothing patches the session to watch examples


def test_not_connected_is_not_ready(ip, panel) -> None:
    magics = ip._ehr_magic[0]
    magics.session.ehr.close()
    magics.session.ehr = None
    magics.database = "/nonexistent/ehr.duckdb"
    status = panel.result("status")
    assert status["database"] is None and "%ehr connect" in status["database_hint"]
    error = panel.error("ask", question="How many patients are there?")
    assert error["code"] == "not_ready" and "%ehr connect" in error["message"]
    assert panel.error("memory.search", text="x")["code"] == "not_ready"


# -- memory -----------------------------------------------------------------------------


def accept_two(ip, panel, fake_llm) -> list[dict[str, Any]]:
    fake_llm.enqueue(fenced(COUNT_CODE), fenced(GENDER_CODE))
    answers = [panel.result("ask", question=q) for q in ("How many patients are there?",
                                                           "How many patients per gender?")]
    for a in answers:
        assert ip.run_cell(a["code"]).success
    return answers


def test_memory_search_get_delete(ip, panel, fake_llm, tmp_path, capsys) -> None:
    accept_two(ip, panel, fake_llm)
    store = memory(tmp_path)
    store.add("How many patients are there?", "answer = 2", origin="accepted", schema="other_schema")
    listed = panel.result("memory.search", text="")
    assert [e["question"] for e in listed["entries"]] == ["How many patients per gender?",
                                                          "How many patients are there?"]
    assert listed["schema"] == "ehrsql_mimic_iv" and all(e["origin"] == "accepted" for e in listed["entries"])
    # what else memory holds for this dataset is listed with its origin, as %ehr memory lists it:
    # an answer stored without review and a team's imported cell are few-shot examples too
    auto = store.add("How many admissions are there?", "answer = 1", origin="auto", schema="ehrsql_mimic_iv")
    imported = store.add("How many stays are there?", "answer = 3", origin="imported", schema="ehrsql_mimic_iv")
    entries = panel.result("memory.search", text="")["entries"]
    assert [(e["id"], e["origin"]) for e in entries[:2]] == [(imported, "imported"), (auto, "auto")]
    ip.run_line_magic("ehr", "memory list")
    magic_ids = [int(line.split()[0][1:]) for line in capsys.readouterr().out.splitlines() if line.startswith("#")]
    assert magic_ids == [e["id"] for e in entries]
    store.delete(auto)
    store.delete(imported)
    found = panel.result("memory.search", text="patients by gender", limit=1)["entries"]
    assert len(found) == 1 and found[0]["question"] == "How many patients per gender?" and found[0]["score"] > 0

    entry_id = found[0]["id"]
    got = panel.result("memory.get", id=entry_id)
    token, question, code = read_marker(got["code"])
    assert token == got["token"] and question == "How many patients per gender?"
    assert code.strip() == GENDER_CODE + "\nanswer"
    assert ip.run_cell(got["code"]).success  # inserting it again keeps one entry
    assert panel.result("pending", token=token)["entry_id"] == entry_id
    assert len(panel.result("memory.search")["entries"]) == 2

    assert panel.result("memory.delete", id=entry_id) == {"id": entry_id, "deleted": True}
    assert [e["id"] for e in panel.result("memory.search")["entries"]] != [entry_id]
    assert panel.error("memory.delete", id=entry_id)["code"] == "not_found"
    assert panel.error("memory.get", id=entry_id)["code"] == "not_found"
    assert panel.result("memory.get", id=f"#{listed['entries'][1]['id']}")["entry"]["id"] == listed["entries"][1]["id"]


def test_accept_and_reject(ip, panel, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE), fenced(GENDER_CODE))
    first = panel.result("ask", question="How many patients are there?")
    second = panel.result("ask", question="How many patients per gender?")
    accepted = panel.result("accept", token=first["token"])
    assert accepted["accepted"] and accepted["entry_id"]
    assert panel.result("reject", token=second["token"]) == {"token": second["token"], "rejected": True}
    assert ip.run_cell(second["code"]).success  # a rejected cell is not stored when run
    assert [e.question for e in memory(tmp_path).list()] == ["How many patients are there?"]
    assert panel.result("pending", token=second["token"])["rejected"] is True
    assert panel.result("accept", token=second["token"])["accepted"] is True  # an explicit accept wins
    assert len(memory(tmp_path).list()) == 2
    assert panel.error("accept", token="0123456789")["code"] == "not_found"
    assert panel.error("reject", token="0123456789")["code"] == "not_found"
    assert panel.error("pending", token="0123456789")["code"] == "not_found"


# -- malformed input --------------------------------------------------------------------


MALFORMED = [
    (None, None, "bad_message"),
    ([], None, "bad_message"),
    ("status", None, "bad_message"),
    (5, None, "bad_message"),
    ({}, None, "bad_message"),
    ({"v": 1, "type": "status"}, None, "bad_message"),
    ({"v": 1, "id": {"a": 1}, "type": "status"}, None, "bad_message"),
    ({"v": 1, "id": True, "type": "status"}, None, "bad_message"),
    ({"v": 1, "id": "x" * 101, "type": "status"}, None, "bad_message"),
    ({"id": "a"}, "a", "unsupported_version"),
    ({"v": 3, "id": "a", "type": "status"}, "a", "unsupported_version"),
    ({"v": True, "id": "a", "type": "status"}, "a", "unsupported_version"),
    ({"v": "1", "id": "a", "type": "status"}, "a", "unsupported_version"),
    ({"v": 1, "id": 7}, "7", "bad_message"),
    ({"v": 1, "id": "a", "type": ""}, "a", "bad_message"),
    ({"v": 1, "id": "a", "type": ["ask"]}, "a", "bad_message"),
    ({"v": 1, "id": "a", "type": "drop_tables"}, "a", "unknown_type"),
    ({"v": 1, "id": "a", "type": "__init__"}, "a", "unknown_type"),
    ({"v": 1, "id": "a", "type": "status", "params": []}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "status", "params": "x"}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "ask"}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "ask", "params": {"question": 5}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "ask", "params": {"question": "   "}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "ask", "params": {"question": "x" * 5000}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "ask", "params": {"question": "q?", "regenerate": "yes"}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.search", "params": {"text": ["a"]}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.search", "params": {"limit": 0}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get"}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get", "params": {"id": "abc"}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get", "params": {"id": -1}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get", "params": {"id": True}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get", "params": {"id": 1.5}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.get", "params": {"id": 999}}, "a", "not_found"),
    ({"v": 1, "id": "a", "type": "memory.delete", "params": {}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "memory.delete", "params": {"id": 999}}, "a", "not_found"),
    ({"v": 1, "id": "a", "type": "accept", "params": {"token": "../etc"}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "accept", "params": {}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "reject", "params": {"token": 12}}, "a", "bad_params"),
    ({"v": 1, "id": "a", "type": "pending", "params": {"token": "x" * 65}}, "a", "bad_params"),
]


@pytest.mark.parametrize("data, rid, code", MALFORMED)
def test_malformed_requests_get_one_error_reply(panel, data, rid, code) -> None:
    out = panel.comm.deliver(data)
    assert len(out) == 1
    (reply,) = out
    assert reply["kind"] == "error" and reply["id"] == rid and reply["error"]["code"] == code, reply
    assert reply["error"]["message"]
    assert panel.result("status")["database"] is not None  # the handler still serves


def test_malformed_comm_messages_do_not_raise(panel) -> None:
    for message in (None, {}, {"content": None}, {"content": {}}, "x"):
        panel.comm.sent.clear()
        panel.comm.callback(message)
        assert panel.comm.sent[0]["error"]["code"] == "bad_message"


def test_our_bugs_are_internal_errors_with_traceback(ip, panel, monkeypatch) -> None:
    def broken() -> None:
        raise RuntimeError("stats exploded")

    monkeypatch.setattr(ip._ehr_magic[0].session.memory, "stats", broken)
    error = panel.error("status")
    assert error["code"] == "internal" and "stats exploded" in error["message"]
    assert "Traceback" in error["detail"]
    monkeypatch.undo()
    assert panel.result("hello")["protocol"] == 2


def test_a_reply_json_cannot_carry_becomes_an_error() -> None:
    sent: list[Any] = []
    handler = PanelHandler(types.SimpleNamespace(), sent.append)
    handler.send(p.result("r1", "status", {"bad": {1, 2}}))
    handler.send(p.result("r2", "status", {"bad": float("nan")}))
    assert [m["error"]["code"] for m in sent] == ["internal", "internal"]
    assert [m["id"] for m in sent] == ["r1", "r2"]


def test_a_closed_comm_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    tried: list[dict[str, Any]] = []

    def closed(message: dict[str, Any]) -> None:
        tried.append(message)
        raise RuntimeError("comm closed")

    with caplog.at_level("ERROR"):
        PanelHandler(types.SimpleNamespace(), closed).handle({"v": 1, "id": "a", "type": "hello"})
    assert [(m["id"], m["type"]) for m in tried] == [("a", "hello")]  # the reply was built and sent once
    assert "cannot send to the panel" in caplog.text and "comm closed" in caplog.text


# -- pure parts -------------------------------------------------------------------------


def test_token_events_are_batched() -> None:
    from ehr_magic.panel.handler import TOKEN_FLUSH_SECONDS

    sent: list[dict[str, Any]] = []
    now = [100.0]  # the stream's clock, moved by hand: no wall-clock time in the test
    stream = EventStream("r1", sent.append, clock=lambda: now[0])
    ev = types.SimpleNamespace
    stream.on_event(ev(kind="phase", phase="code", detail="step 1/10", step=None, elapsed=0.1))
    for piece, later in [("ans", 0.01), ("wer", 0.01), (" = ", TOKEN_FLUSH_SECONDS), ("1", 0.01)]:
        now[0] += later
        stream.on_event(ev(kind="token", detail=piece, step=None, elapsed=0.2))
    stream.on_event(ev(kind="phase", phase="run", detail="step 1/10", step=None, elapsed=0.3))
    stream.on_event(ev(kind="done", detail="", step=None, elapsed=0.4))
    bodies = [m["event"] for m in sent]
    # tokens wait until a flush interval has passed since the last message, or another event comes
    assert [b["kind"] for b in bodies] == ["phase", "token", "token", "phase"]
    assert [b["text"] for b in bodies if b["kind"] == "token"] == ["answer = ", "1"]
    assert bodies[-1]["phase"] == "run"


def test_answer_preview_tables_are_capped() -> None:
    frame = pl.DataFrame({f"c{i}": list(range(80)) for i in range(40)})
    preview = p.answer_preview(frame)
    assert preview["kind"] == "table" and len(preview["rows"]) == 50 and len(preview["columns"]) == 30
    assert preview["total_rows"] == 80 and preview["total_columns"] == 40 and preview["truncated"]
    lazy = p.answer_preview(frame.lazy())
    assert len(lazy["rows"]) == 50 and lazy["truncated"]
    series = p.answer_preview(pl.Series("n", [1.5, float("nan"), None]))
    assert series["columns"] == ["n"] and series["rows"] == [[1.5], [None], [None]]
    dates = p.answer_preview(pl.DataFrame({"t": [dt.datetime(2100, 1, 2, 3, 4)], "d": [dt.date(2100, 1, 2)],
                                           "s": ["x" * 500]}))
    assert dates["rows"][0][:2] == ["2100-01-02 03:04:00", "2100-01-02"] and len(dates["rows"][0][2]) == 200
    json.dumps(dates, allow_nan=False)


@pytest.mark.parametrize("value, expected", [
    (None, {"kind": "none"}),
    (94, {"kind": "value", "value": 94, "type": "int"}),
    (2.5, {"kind": "value", "value": 2.5, "type": "float"}),
    (float("inf"), {"kind": "value", "value": None, "type": "float"}),
    ("F", {"kind": "value", "value": "F", "type": "str"}),
    (True, {"kind": "value", "value": True, "type": "bool"}),
    (dt.date(2100, 1, 2), {"kind": "value", "value": "2100-01-02", "type": "date"}),
    ([1, "a", None], {"kind": "list", "values": [1, "a", None], "total": 3, "truncated": False}),
    ({"F": 1}, {"kind": "table", "columns": ["key", "value"], "dtypes": ["str", "object"], "rows": [["F", 1]],
                "total_rows": 1, "total_columns": 2, "truncated": False}),
])
def test_answer_preview_values(value, expected) -> None:
    assert p.answer_preview(value) == expected


def test_answer_preview_lists_are_capped() -> None:
    preview = p.answer_preview(list(range(120)))
    assert preview["total"] == 120 and len(preview["values"]) == 50 and preview["truncated"]


# -- a real kernel ----------------------------------------------------------------------


class KernelPanel:
    """Speaks to a real kernel the way JupyterLab does: comm_open / comm_msg on shell,
    replies as comm_msg / comm_close on iopub."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.comm_id = uuid.uuid4().hex

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        msg = self.client.session.msg(msg_type, content)
        self.client.shell_channel.send(msg)

    def open(self) -> dict[str, Any]:
        self._send("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {}})
        return self.next()

    def send(self, data: Any) -> None:
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next comm message (``{"closed": True}`` for a comm_close) for our comm."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            content = msg["content"]
            if content.get("comm_id") != self.comm_id:
                continue
            if msg["msg_type"] == "comm_close":
                return {"closed": True}
            if msg["msg_type"] == "comm_msg":
                return content["data"]
        raise TimeoutError("no comm message from the kernel")

    def call(self, data: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        self.send(data)
        events = []
        while True:
            message = self.next()
            if message.get("kind") == "event":
                events.append(message["event"])
            else:
                return events, message


@pytest.mark.slow
def test_real_kernel_comm(ehrsql_db: Path, fake_llm, monkeypatch, tmp_path) -> None:
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("EHR_MAGIC_DB", str(ehrsql_db))
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(tmp_path / "memory.sqlite"))
    km, client = start_new_kernel(kernel_name="python3")
    try:
        before = KernelPanel(client)  # ehr_magic not loaded yet: the kernel closes the comm
        assert before.open() == {"closed": True}

        reply = client.execute_interactive("%load_ext ehr_magic", silent=True, store_history=False, timeout=60)
        assert reply["content"]["status"] == "ok"
        panel = KernelPanel(client)
        hello = panel.open()
        assert hello["kind"] == "hello" and hello["protocol"] == 2

        _, status = panel.call({"v": 1, "id": "s", "type": "status"})
        assert status["result"]["database"]["schema"] == "ehrsql_mimic_iv"
        assert status["result"]["model"]["name"] == "fake-model"

        for data in (None, "x", {"v": 1, "id": "u", "type": "nope"}, {"v": 1, "id": "m", "type": "memory.get"}):
            _, error = panel.call(data)
            assert error["kind"] == "error"

        fake_llm.enqueue(fenced(COUNT_CODE))
        events, result = panel.call({"v": 1, "id": "a", "type": "ask",
                                     "params": {"question": "How many patients are there?"}})
        assert result["kind"] == "result" and result["result"]["answer"]["value"] == 94
        assert {"phase", "token", "step", "examples"} <= {e["kind"] for e in events}

        reply = client.execute_interactive(result["result"]["code"], store_history=False, timeout=60)
        assert reply["content"]["status"] == "ok"
        _, pending = panel.call({"v": 1, "id": "p", "type": "pending", "params": {"token": result["result"]["token"]}})
        assert pending["result"]["accepted"] is True
        assert [e.question for e in memory(tmp_path).list()] == ["How many patients are there?"]
        assert km.is_alive()
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def test_thread_follow_up_and_new_conversation(ip, panel, fake_llm) -> None:
    assert "conversation" in panel.comm.sent[0]["types"] and "conversation.new" in panel.comm.sent[0]["types"]
    assert panel.result("conversation") == {"turns": []}
    fake_llm.enqueue(fenced(COUNT_CODE), "Standalone question: How many female patients are there?\n"
                     + fenced("answer = ehr.sql(\"SELECT count(*) FROM patients WHERE gender = 'f'\").item()"))
    panel.call("ask", question="How many patients are there?")
    _, reply = panel.call("ask", question="now only the women")
    result = reply["result"]
    assert result["standalone_question"] == "How many female patients are there?"
    assert read_marker(result["code"])[1] == "How many female patients are there?"
    assert "How many patients are there?" in fake_llm.chat_requests()[-1].last_user_message
    turns = result["conversation"]
    assert [t["question"] for t in turns] == ["How many patients are there?", "now only the women"]
    assert turns[1]["standalone"] == "How many female patients are there?" and turns[1]["status"] == "answered"
    assert panel.result("conversation")["turns"] == turns
    assert panel.result("conversation.new") == {"turns": []}
    assert panel.result("conversation") == {"turns": []}
    # After a new conversation the model sees no earlier turn, and may ask; wording never refuses.
    fake_llm.enqueue("CLARIFY: Only the men of which question?")
    _, reply = panel.call("ask", question="now only the men")
    assert reply["result"]["status"] == "clarify" and reply["result"]["message"] == "Only the men of which question?"
    assert len(fake_llm.chat_requests()) == 3
    assert "How many patients are there?" not in fake_llm.chat_requests()[-1].last_user_message


# -- one session behind both front ends ---------------------------------------------------


def test_the_magic_and_the_panel_give_the_same_session_results(ip, panel, fake_llm, tmp_path) -> None:
    """The same scripted conversation through %%ehr and through the panel: the same answers,
    offered cells, insert decisions, history, conversation and waiting cells."""
    women = "How many female patients are there?"
    women_code = "answer = ehr.sql(\"SELECT count(*) FROM patients WHERE gender = 'f'\").item()"
    session = ip._ehr_magic[0].session

    def by_magic(question: str) -> tuple:
        ip.rl_next_input = None
        ip.run_cell_magic("ehr", "--quiet", question)
        cell = ip.rl_next_input or ""
        return (read_marker(cell)[1:] if cell else None), ip.user_ns["answer"], cell

    def by_panel(question: str) -> tuple:
        result = panel.result("ask", question=question)
        offered = read_marker(result["code"])[1:] if result["insert"] else None
        return offered, result["answer"]["value"], result["code"]

    def conversation(ask, store: str) -> dict:
        ip.run_line_magic("config", f"EhrMagics.memory = {str(tmp_path / store)!r}")
        ip.run_line_magic("ehr", "new")
        history_from = len(session.cells.history)
        fake_llm.enqueue(fenced(COUNT_CODE), f"Standalone question: {women}\n" + fenced(women_code))
        first = ask("How many patients are there?")
        assert ip.run_cell(first[2]).success  # the analyst runs the offered cell: accepted into memory
        turns = [first[:2], ask("now only the women")[:2], ask("How many patients are there?")[:2]]
        return {
            "turns": turns,
            "history": [(h.question, h.status, h.source) for h in session.cells.history[history_from:]],
            "conversation": [(t.question, t.standalone, t.status, t.code, t.answer, t.source)
                             for t in session.conversation.turns],
            "waiting": [(c.question, c.code, c.answer_preview) for c in list(session.cells.pending.values())[-3:]],
        }

    magic = conversation(by_magic, "magic.sqlite")
    through_panel = conversation(by_panel, "panel.sqlite")
    assert magic == through_panel
    assert [offered is not None for offered, _ in magic["turns"]] == [True, True, False]  # a reused cell is not new
    assert magic["turns"][1][0] == (women, women_code + "\nanswer")
    assert [source for _, _, source in magic["history"]] == ["agent", "agent", "memory"]
    assert len(fake_llm.chat_requests()) == 4


def test_the_panel_keeps_the_privacy_and_review_settings_of_the_notebook(ip, panel, fake_llm) -> None:
    """%ehr config privacy and run_mode hold for the panel's questions as for %%ehr: the same
    masked look output goes back to the model, and code waiting for review is not run."""
    magics = panel.magics
    question = "How many patients are there?"
    look = "print(ehr.sql('SELECT subject_id FROM patients ORDER BY subject_id LIMIT 3'))"
    magics.privacy = "schema"
    requests = []
    for ask in (lambda: ip.run_cell_magic("ehr", "--quiet --regenerate", question),
                lambda: panel.result("ask", question=question, regenerate=True)):
        ip.run_line_magic("ehr", "new")
        fake_llm.enqueue(fenced(look), fenced("answer = ehr.sql('SELECT count(*) FROM patients').item()"))
        ask()
        requests.append([r.messages for r in fake_llm.chat_requests()[-2:]])
    assert requests[0] == requests[1]
    first_id = ip.user_ns["ehr"].sql("SELECT min(subject_id) FROM patients").item()
    assert str(first_id) not in requests[1][1][-1]["content"]  # the look's output went back masked

    magics.privacy, magics.run_mode = None, "review"
    ip.run_line_magic("ehr", "new")
    fake_llm.enqueue(fenced(COUNT_CODE))
    result = panel.result("ask", question=question, regenerate=True)
    assert result["status"] == "generated" and result["answer"] == {"kind": "none"}
    assert result["insert"] and read_marker(result["code"])[2].strip() == CELL_CODE
