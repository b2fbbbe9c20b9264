"""Model calls per question in two-turn conversations on an unfamiliar schema.

The MIMIC-III demo is loaded as a plain CSV folder (``ehr-magic data load csv``), so the
agent has drafted knowledge only and no examples. Nine conversations each ask a broad
question, then the constraints; in one the true answer of the follow-up is empty (a patient
never given a drug that others were given). A scripted fake model (real HTTP,
tests/fake_llm.py) behaves as a capable model on a schema it does not know: it writes the gold
code of the turn at once when the request already holds what that code needs (each stored
value the gold SQL compares with, quoted as stored: 'Potassium', 'MICU'), and otherwise first
looks (``ehr.describe``, ``ehr.lookup``, a ``LIMIT`` peek; twice it puts ``ehr.describe`` output
into ``answer``), then answers with the gold code. Each answer is checked against that gold
code's result.

Prints, per run: questions, answered, answered correctly, model calls (code, debugger), model
calls per question, per answered question and per correct answer, the questions whose first
request lacked what the gold code needs, and the most calls any question took (goals: 1.0
call per question where the prompt has what it needs, none above 4). Run it on another checkout
to compare (``PYTHONPATH=/path/to/checkout python bench/bench_conversation.py``).

    python bench/bench_conversation.py [--db FILE]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import polars as pl  # noqa: E402
import sqlglot  # noqa: E402
from sqlglot import exp  # noqa: E402

import ehr_magic  # noqa: E402
from ehr_magic.agent import AgentSettings  # noqa: E402
from ehr_magic.llm import LLMClient, resolve_settings  # noqa: E402
from ehr_magic.session import Session  # noqa: E402
from fake_llm import FakeLLMServer  # noqa: E402

MIMIC_III = REPO.parent / "shared" / "data" / "mimic-iii-clinical-database-demo-1.4"
DEBUGGER = "rubber-duck debugger"


@dataclass(frozen=True)
class Turn:
    question: str
    look: str  # what the model runs first on a schema it does not know
    gold: str  # then the code that answers
    standalone: str = ""  # the follow-up restated ("" for a first question)


def conversation(broad: tuple[str, str, str], narrow: tuple[str, str, str, str]) -> tuple[Turn, Turn]:
    return Turn(*broad), Turn(narrow[0], narrow[1], narrow[2], narrow[3])


CONVERSATIONS: list[tuple[Turn, Turn]] = [
    conversation(
        ("How many admissions are there per admission type?", "print(ehr.describe('admissions'))",
         "answer = ehr.sql('SELECT admission_type, count(*) AS n FROM admissions GROUP BY admission_type "
         "ORDER BY n DESC, admission_type')"),
        ("Only those that ended in death in the hospital.",
         "print(ehr.sql('SELECT hospital_expire_flag, count(*) AS n FROM admissions GROUP BY 1'))",
         "answer = ehr.sql('SELECT admission_type, count(*) AS n FROM admissions WHERE hospital_expire_flag = 1 "
         "GROUP BY admission_type ORDER BY n DESC, admission_type')",
         "How many admissions that ended in death in the hospital are there per admission type?")),
    conversation(
        ("What is the average length of an ICU stay?", "print(ehr.describe('icustays'))",
         "answer = ehr.sql('SELECT avg(los) FROM icustays').item()"),
        ("Only in the MICU, in days.", "print(ehr.sql('SELECT DISTINCT first_careunit FROM icustays'))",
         "answer = ehr.sql(\"SELECT avg(los) FROM icustays WHERE first_careunit = 'MICU'\").item()",
         "What is the average length in days of an ICU stay that started in the MICU?")),
    conversation(
        ("How many patients are there by gender?", "answer = ehr.describe('patients')",
         "answer = ehr.sql('SELECT gender, count(*) AS n FROM patients GROUP BY gender ORDER BY gender')"),
        ("Only those who have died.", "print(ehr.sql('SELECT expire_flag, count(*) FROM patients GROUP BY 1'))",
         "answer = ehr.sql('SELECT gender, count(*) AS n FROM patients WHERE expire_flag = 1 GROUP BY gender "
         "ORDER BY gender')",
         "How many patients who have died are there by gender?")),
    conversation(
        ("What are the most common diagnoses?", "print(ehr.describe('diagnoses_icd'))",
         "answer = ehr.sql('SELECT icd9_code, count(*) AS n FROM diagnoses_icd GROUP BY icd9_code "
         "ORDER BY n DESC, icd9_code LIMIT 10')"),
        ("Just the top 5, with their titles.", "print(ehr.describe('d_icd_diagnoses'))",
         "answer = ehr.sql('SELECT d.icd9_code, t.short_title, count(*) AS n FROM diagnoses_icd d "
         "JOIN d_icd_diagnoses t ON t.icd9_code = d.icd9_code GROUP BY d.icd9_code, t.short_title "
         "ORDER BY n DESC, d.icd9_code LIMIT 5')",
         "What are the 5 most common diagnoses, with their titles?")),
    conversation(
        ("What is the average potassium value?", "print(ehr.lookup('d_labitems', 'label', 'potassium'))",
         "answer = ehr.sql(\"SELECT avg(l.valuenum) FROM labevents l JOIN d_labitems d ON d.itemid = l.itemid "
         "WHERE d.label = 'Potassium' AND d.fluid = 'Blood'\").item()"),
        ("Only in emergency admissions.", "print(ehr.sql('SELECT DISTINCT admission_type FROM admissions'))",
         "answer = ehr.sql(\"SELECT avg(l.valuenum) FROM labevents l JOIN d_labitems d ON d.itemid = l.itemid "
         "JOIN admissions a ON a.hadm_id = l.hadm_id WHERE d.label = 'Potassium' AND d.fluid = 'Blood' "
         "AND a.admission_type = 'EMERGENCY'\").item()",
         "What is the average blood potassium value in emergency admissions?")),
    conversation(
        ("Which drugs were prescribed most often?", "answer = ehr.describe('prescriptions')",
         "answer = ehr.sql('SELECT drug, count(*) AS n FROM prescriptions GROUP BY drug ORDER BY n DESC, drug "
         "LIMIT 10')"),
        ("Only those given intravenously.",
         "print(ehr.sql('SELECT route, count(*) AS n FROM prescriptions GROUP BY route ORDER BY n DESC LIMIT 8'))",
         "answer = ehr.sql(\"SELECT drug, count(*) AS n FROM prescriptions WHERE route = 'IV' GROUP BY drug "
         "ORDER BY n DESC, drug LIMIT 10\")",
         "Which drugs given intravenously were prescribed most often?")),
    conversation(
        ("How many ICU stays were there per first care unit?",
         "print(ehr.sql('SELECT * FROM icustays LIMIT 5'))",
         "answer = ehr.sql('SELECT first_careunit, count(*) AS n FROM icustays GROUP BY first_careunit "
         "ORDER BY first_careunit')"),
        ("Only stays longer than two days.", "print(ehr.sql('SELECT min(los), max(los) FROM icustays'))",
         "answer = ehr.sql('SELECT first_careunit, count(*) AS n FROM icustays WHERE los > 2 "
         "GROUP BY first_careunit ORDER BY first_careunit')",
         "How many ICU stays longer than two days were there per first care unit?")),
    conversation(
        ("What is the distribution of ethnicity across admissions?", "print(ehr.describe('admissions'))",
         "answer = ehr.sql('SELECT ethnicity, count(*) AS n FROM admissions GROUP BY ethnicity "
         "ORDER BY n DESC, ethnicity')"),
        ("Only for Medicare patients.", "print(ehr.sql('SELECT DISTINCT insurance FROM admissions'))",
         "answer = ehr.sql(\"SELECT ethnicity, count(*) AS n FROM admissions WHERE insurance = 'Medicare' "
         "GROUP BY ethnicity ORDER BY n DESC, ethnicity\")",
         "What is the distribution of ethnicity across admissions of Medicare patients?")),
    conversation(  # the follow-up's true answer is empty: the patient was never given the drug
        ("How many patients were given vancomycin?",
         "print(ehr.lookup('prescriptions', 'drug', 'vancomycin'))",
         "answer = ehr.sql(\"SELECT count(DISTINCT subject_id) FROM prescriptions WHERE drug = 'Vancomycin'\").item()"),
        ("And which of patient 10006's admissions had it?",
         "print(ehr.lookup('prescriptions', 'drug', 'vancomycin'))",
         "answer = ehr.sql(\"SELECT DISTINCT hadm_id FROM prescriptions WHERE subject_id = 10006 "
         "AND drug = 'Vancomycin' ORDER BY hadm_id\")",
         "Which admissions of patient 10006 had vancomycin prescribed?")),
]


def fenced(code: str) -> str:
    return f"Knowledge:\n- looked up in this database\n```python\n{code}\n```"


def needed_values(code: str) -> list[str]:
    """The stored values the gold code's SQL compares with: what a model must know to write it."""
    values = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "select" in node.value.lower():
            values += [literal.this for literal in sqlglot.parse_one(node.value, read="duckdb").find_all(exp.Literal)
                       if literal.is_string]
    return values


def lacks(text: str, code: str) -> list[str]:
    """The values ``code`` needs that ``text`` does not show quoted as stored."""
    return [v for v in needed_values(code) if f"'{v}'" not in text and f'"{v}"' not in text]


def capable_model(turns: dict[str, Turn], first_lacked: list[str]):
    """Replies as a capable model on an unfamiliar schema: it answers at once when the request
    holds the stored values the answer needs, else it looks first, then answers."""

    def reply(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if DEBUGGER in messages[0]["content"]:
            return "The code ran; now compute `answer` from the data you looked at."
        first = messages[1]["content"]
        turn = next(t for q, t in turns.items() if first.rstrip().endswith(f"Question: {q}"))
        looked = any(m["role"] == "assistant" for m in messages)
        text = "\n".join(m["content"] for m in messages)
        missing = lacks(text, turn.gold)
        if not looked and missing:
            first_lacked.append(f"{turn.question} (lacks {', '.join(missing)})")
        code = turn.gold if looked or not missing else turn.look
        text = fenced(code)
        return f"Standalone question: {turn.standalone}\n{text}" if turn.standalone else text

    return reply


def same(answer: Any, expected: Any) -> bool:
    if isinstance(expected, pl.DataFrame):
        return isinstance(answer, pl.DataFrame) and answer.rows() == expected.rows()
    if isinstance(expected, float) and isinstance(answer, float):
        return abs(answer - expected) < 1e-9 * max(1.0, abs(expected))
    return answer == expected


def gold_answer(ehr: Any, code: str) -> Any:
    namespace: dict[str, Any] = {"ehr": ehr, "pl": pl}
    exec(code, namespace)  # noqa: S102 (our own gold code, not model output)
    return namespace["answer"]


def build(out: Path) -> Path:
    from ehr_magic.sources import folder as csv_folder

    if not out.exists():
        print(f"loading {MIMIC_III.name} as a CSV folder into {out} ...", file=sys.stderr)
        csv_folder.load([MIMIC_III], out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="the MIMIC-III demo loaded as CSV (built when missing)")
    args = parser.parse_args()
    db = args.db or Path(tempfile.gettempdir()) / "ehr-magic-bench" / "mimic-iii-csv.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    build(db)
    turns = {t.question: t for pair in CONVERSATIONS for t in pair}
    questions = answered = correct = code_calls = debug_calls = 0
    first_lacked: list[str] = []
    per_question: list[tuple[int, str]] = []
    with FakeLLMServer() as server, ehr_magic.connect(db) as ehr:
        server.responder = capable_model(turns, first_lacked)
        os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench", EHR_MAGIC_MODEL="fake")
        with LLMClient(resolve_settings(), audit=False) as client:
            for pair in CONVERSATIONS:
                session = Session(ehr, llm=client, settings=AgentSettings(timeout=60.0, stream=False))
                for turn in pair:
                    answer = session.ask(turn.question)
                    questions += 1
                    calls = answer.result.llm_calls if answer.result else []
                    code_calls += sum(c.purpose != "debug" for c in calls)
                    debug_calls += sum(c.purpose == "debug" for c in calls)
                    per_question.append((len(calls), turn.question))
                    answered += answer.status == "answered"
                    correct += answer.status == "answered" and same(answer.answer, gold_answer(ehr, turn.gold))
    calls = code_calls + debug_calls
    lacked = {line.split(" (lacks ")[0] for line in first_lacked}
    had = [n for n, q in per_question if q not in lacked]
    print(f"schema {ehr.schema} (drafted knowledge only), {len(CONVERSATIONS)} two-turn conversations")
    print(f"questions {questions}, answered {answered}, answered correctly {correct}")
    print(f"model calls {calls} (code {code_calls}, debugger {debug_calls})")
    print(f"model calls per question {calls / max(questions, 1):.2f}, per answered question "
          f"{calls / max(answered, 1):.2f}, per correct answer {calls / max(correct, 1):.2f}")
    print(f"first request held what the gold code needs: {len(had)} of {questions} questions, at "
          f"{sum(had) / max(len(had), 1):.2f} calls each; most calls for one question: "
          f"{max(per_question)[0]} ({max(per_question)[1]})")
    for line in first_lacked:
        print(f"  looked first: {line}")


if __name__ == "__main__":
    main()
