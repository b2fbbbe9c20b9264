"""The evaluation end to end: the oracle on the real EHRSQL-2024 splits, the runner
(workers, resume, memory growth) and the ``ehr-magic eval`` command."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import ehr_magic.cli as cli
from ehr_magic.errors import ConfigError, EhrMagicError
from ehr_magic.eval import ANSWERERS, EvalContext, Outcome, evaluate, load_split, run_sqlite_sql
from ehr_magic.eval.metrics import Prices
from datapaths import EHRSQL_DIR, EHRSQL_SQLITE

pytestmark = pytest.mark.shared_data(EHRSQL_SQLITE)


@pytest.fixture(scope="session")
def mini_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six answerable and three unanswerable valid questions, as a dataset folder with one split."""
    valid = EHRSQL_DIR / "valid"
    data = json.loads((valid / "data.json").read_text())
    labels = json.loads((valid / "label.json").read_text())
    answers = json.loads((valid / "answer.json").read_text())
    answerable = [q for q in data["data"] if labels[q["id"]] != "null"][:6]
    unanswerable = [q for q in data["data"] if labels[q["id"]] == "null"][:3]
    chosen = [answerable[0], unanswerable[0], *answerable[1:4], unanswerable[1], *answerable[4:], unanswerable[2]]
    root = tmp_path_factory.mktemp("mini")
    folder = root / "mini"
    folder.mkdir()
    (folder / "data.json").write_text(json.dumps({"version": "mini", "data": chosen}))
    (folder / "label.json").write_text(json.dumps({q["id"]: labels[q["id"]] for q in chosen}))
    (folder / "answer.json").write_text(json.dumps({q["id"]: answers[q["id"]] for q in chosen}))
    return root


def run_cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """``ehr-magic eval ...`` through the real CLI entry point."""
    return cli.main(["eval", *argv])


class ScriptedAnswerer:
    """A fake answerer: right on even positions, wrong on odd ones, abstains on null gold
    questions except the first, which it answers (wrongly). Counts what it was asked."""

    def __init__(self, context: EvalContext) -> None:
        self.items = context.items
        self.asked: list[str] = []
        self.learned: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.order = [item.id for item in context.split]

    def answer(self, question: str, qid: str) -> Outcome:
        with self.lock:
            self.asked.append(qid)
        item = self.items[qid]
        position = self.order.index(qid)
        tokens = {"llm_calls": 2, "prompt_tokens": 1000, "completion_tokens": 100}
        if item.gold_answer is None:
            if position == 1:
                return Outcome("answered", answer=[["something"]], code="answer = 1", **tokens)
            return Outcome("abstained", note="not in the database", **tokens)
        if position % 2 == 0:
            return Outcome("answered", answer=item.gold_answer, code=f"# right {qid}", **tokens)
        return Outcome("answered", answer=[["wrong"]], code="# wrong", **tokens)

    def learn(self, question: str, code: str, qid: str) -> None:
        self.learned.append((qid, code))


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[ScriptedAnswerer]:
    made: list[ScriptedAnswerer] = []

    def factory(context: EvalContext) -> ScriptedAnswerer:
        made.append(ScriptedAnswerer(context))
        return made[-1]

    monkeypatch.setitem(ANSWERERS, "agent", factory)
    return made


# -- the oracle ------------------------------------------------------------------------------


@pytest.mark.slow
def test_oracle_reproduces_every_valid_answer(ehrsql_db: Path) -> None:
    """All 931 answerable valid questions, gold SQL translated and run with ``ehr.sql``.

    About 12 s of CPU (sqlglot parsing and translation ~6 ms, DuckDB ~4 ms per question)."""
    report = evaluate(EHRSQL_DIR, "valid", ehrsql_db, mode="oracle")
    m = report.metrics
    failures = [(r.id, r.error or r.answer) for r in report.results if not r.correct]
    assert failures == []
    assert (m["n"], m["answerable"], m["answered"], m["correct"]) == (1163, 931, 931, 1163)
    assert m["sr"] == m["rs10"] == m["rsN"] == m["precision"] == 100.0


@pytest.mark.slow
def test_oracle_reproduces_every_train_answer(ehrsql_db: Path) -> None:
    report = evaluate(EHRSQL_DIR, "train", ehrsql_db, mode="oracle")
    assert [r.id for r in report.results if not r.correct] == []
    assert report.metrics["answered"] == 4674


def test_run_sqlite_sql_uses_the_ehr_path(ehrsql_db: Path) -> None:
    from ehr_magic import connect

    with connect(ehrsql_db) as ehr:
        frame = run_sqlite_sql(ehr, "SELECT datetime(current_time, 'start of year', '-1 year') AS y")
    assert str(frame["y"][0]) == "2099-01-01 00:00:00"


def test_memory_examples_carry_duckdb_code(ehrsql_db: Path, mini_dataset: Path) -> None:
    from ehr_magic import connect

    with connect(ehrsql_db) as ehr:
        split = load_split(mini_dataset, "mini")
        context = EvalContext(ehr=ehr, split=split, mode="memory", memory_split=split)
        examples = context.memory_examples()
        assert len(examples) == 6
        for example in examples:
            namespace: dict = {"ehr": ehr}
            exec(example.code, namespace)  # noqa: S102 - our own generated example code
            from ehr_magic.eval.scoring import normalize_answer

            assert normalize_answer(namespace["answer"]) == example.answer


# -- the runner ------------------------------------------------------------------------------


def test_metrics_follow_what_happened(ehrsql_db: Path, mini_dataset: Path, scripted: list) -> None:
    report = evaluate(mini_dataset, "mini", ehrsql_db, mode="agent", prices=Prices(1.0, 4.0))
    m = report.metrics
    # positions: 0 right, 1 null answered, 2 right, 3 wrong, 4 right, 5 null abstained, 6 right, 7 wrong, 8 null
    assert (m["n"], m["answered"], m["correct_answers"], m["correct_abstentions"]) == (9, 7, 4, 2)
    assert (m["wrong_answers"], m["answered_unanswerable"], m["abstained"]) == (2, 1, 2)
    assert m["sr"] == pytest.approx(100 * 6 / 9, abs=1e-3)
    assert m["cr"] == pytest.approx(100 * 7 / 9, abs=1e-3)
    assert m["rs0"] == m["sr"]
    assert m["rs10"] == pytest.approx(100 * (6 - 3 * 10) / 9, abs=1e-3)
    assert m["rsN"] == pytest.approx(100 * (6 - 3 * 9) / 9, abs=1e-3)
    assert m["precision"] == pytest.approx(100 * 4 / 7, abs=1e-3)
    assert m["llm_calls"] == 18 and m["prompt_tokens"] == 9000 and m["completion_tokens"] == 900
    assert m["cost"] == pytest.approx((9000 * 1.0 + 900 * 4.0) / 1e6)


def test_workers_give_the_same_results(ehrsql_db: Path, mini_dataset: Path, scripted: list) -> None:
    one = evaluate(mini_dataset, "mini", ehrsql_db, mode="agent").metrics
    three = evaluate(mini_dataset, "mini", ehrsql_db, mode="agent", workers=3).metrics
    for key in ("n", "answered", "correct", "rs10", "precision", "llm_calls"):
        assert one[key] == three[key]
    assert sorted(scripted[1].asked) == sorted(scripted[0].asked)


def test_grow_memory_learns_from_correct_answers(ehrsql_db: Path, mini_dataset: Path, scripted: list) -> None:
    evaluate(mini_dataset, "mini", ehrsql_db, mode="agent", grow_memory=True)
    learned = scripted[0].learned
    assert [code for _, code in learned] == [f"# right {qid}" for qid, _ in learned]
    assert len(learned) == 4
    with pytest.raises(EhrMagicError, match="--workers 1"):
        evaluate(mini_dataset, "mini", ehrsql_db, mode="agent", grow_memory=True, workers=2)


def test_answerer_crash_is_a_failed_question(ehrsql_db: Path, mini_dataset: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    class Crashing:
        def answer(self, question: str, qid: str) -> Outcome:
            raise RuntimeError("boom")

    monkeypatch.setitem(ANSWERERS, "agent", lambda context: Crashing())
    report = evaluate(mini_dataset, "mini", ehrsql_db, mode="agent")
    assert report.metrics["failed"] == 9
    assert report.results[0].error == "RuntimeError: boom"


def test_configuration_error_stops_the_run(ehrsql_db: Path, mini_dataset: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    class Unconfigured:
        def answer(self, question: str, qid: str) -> Outcome:
            raise ConfigError("No model configured; set EHR_MAGIC_MODEL.")

    monkeypatch.setitem(ANSWERERS, "agent", lambda context: Unconfigured())
    with pytest.raises(ConfigError):
        evaluate(mini_dataset, "mini", ehrsql_db, mode="agent")


# -- the command -----------------------------------------------------------------------------


def test_out_folder_and_json(ehrsql_db: Path, mini_dataset: Path, tmp_path: Path, capsys,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    code = run_cli(monkeypatch, str(mini_dataset), "--split", "mini", "--db", str(ehrsql_db), "--mode", "oracle",
                   "--out", str(out), "--json", "--quiet")
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    for key in ("n", "answered", "correct", "sr", "cr", "rs0", "rs5", "rs10", "rsN", "precision", "llm_calls",
                "prompt_tokens", "completion_tokens", "seconds", "per_template", "per_tables", "cost"):
        assert key in printed
    assert printed["correct"] == printed["n"] == 9 and printed["rs10"] == 100.0
    assert json.loads((out / "metrics.json").read_text())["n"] == 9
    assert "| RS(10) | 100.00 |" in (out / "metrics.md").read_text()
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 9
    assert {"id", "question", "status", "answer", "gold", "correct", "code", "error", "seconds"} <= set(lines[0])
    assert lines[0]["code"].startswith('answer = ehr.sql("""')


def test_resume_skips_finished_questions(ehrsql_db: Path, mini_dataset: Path, tmp_path: Path, scripted: list,
                                         monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    out = tmp_path / "run"
    common = [str(mini_dataset), "--split", "mini", "--db", str(ehrsql_db), "--out", str(out), "--quiet"]
    assert run_cli(monkeypatch, *common, "--limit", "4") == 0
    assert len(scripted[0].asked) == 4
    capsys.readouterr()
    # An interrupted write leaves half a line: that question runs again.
    with open(out / "results.jsonl", "a") as handle:
        handle.write('{"id": "cut sh')
    assert run_cli(monkeypatch, *common, "--limit", "7", "--json") == 0
    assert len(scripted[1].asked) == 3 and not set(scripted[1].asked) & set(scripted[0].asked)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len([line for line in lines if line.startswith('{"id": "cut')]) == 1
    assert json.loads(capsys.readouterr().out)["n"] == 7
    assert run_cli(monkeypatch, *common) == 0  # the rest
    assert len(scripted[2].asked) == 2


def test_out_folder_of_another_run_is_refused(ehrsql_db: Path, mini_dataset: Path, tmp_path: Path, capsys,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    common = [str(mini_dataset), "--split", "mini", "--db", str(ehrsql_db), "--out", str(out), "--quiet"]
    assert run_cli(monkeypatch, *common, "--mode", "oracle", "--limit", "1") == 0
    capsys.readouterr()
    monkeypatch.setitem(ANSWERERS, "memory", ANSWERERS["oracle"])
    assert run_cli(monkeypatch, *common, "--mode", "memory") == 2
    assert "another run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}", "--split", "valid", "--db", "{db}"], "No dataset folder"),
        (["{data}", "--split", "nope", "--db", "{db}"], "No split 'nope'"),
        (["{data}", "--split", "valid", "--db", "{missing}"], "No database file"),
        (["{data}", "--split", "valid", "--db", "{db}", "--memory-from", "nope"], "No split 'nope'"),
    ],
)
def test_bad_paths_give_one_line_and_exit_2(args: list[str], message: str, ehrsql_db: Path, tmp_path: Path,
                                            capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"missing": str(tmp_path / "missing"), "db": str(ehrsql_db), "data": str(EHRSQL_DIR)}
    code = run_cli(monkeypatch, *[a.format(**values) for a in args], "--mode", "oracle", "--quiet")
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_mode_not_available_yet(ehrsql_db: Path, mini_dataset: Path, capsys,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(ANSWERERS, "memory", raising=False)
    code = run_cli(monkeypatch, str(mini_dataset), "--split", "mini", "--db", str(ehrsql_db), "--mode", "memory",
                   "--quiet")
    assert code == 2
    assert "Mode memory is not available yet" in capsys.readouterr().err


def test_lazy_registration_by_module_path(ehrsql_db: Path, mini_dataset: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ANSWERERS, "agent", "ehr_magic.eval.answerers:OracleAnswerer")
    report = evaluate(mini_dataset, "mini", ehrsql_db, mode="agent")
    assert report.metrics["correct"] == 9
    monkeypatch.setitem(ANSWERERS, "agent", "ehr_magic.no_such_module:make")
    with pytest.raises(EhrMagicError, match="Mode agent is not available yet"):
        evaluate(mini_dataset, "mini", ehrsql_db, mode="agent")


def test_human_summary(ehrsql_db: Path, mini_dataset: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli(monkeypatch, str(mini_dataset), "--split", "mini", "--db", str(ehrsql_db), "--mode", "oracle",
                   "--quiet") == 0
    out = capsys.readouterr().out
    assert "oracle on mini: 9 questions, 6 answered, 9 correct" in out
    assert "RS(10) 100.00" in out
