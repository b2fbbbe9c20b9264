"""The prompt budget: the context window comes from the settings, the server or a default;
only the tables a question needs are described in full; the prompt fits the window,
shrinking examples before the schema; and what cannot fit is one clear sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

import ehr_magic
from ehr_magic import skills
from ehr_magic.agent import Agent, AgentSettings
from ehr_magic.agent.budget import SYSTEM_SHARE, PromptTooLongError, reply_reserve, system_form, tables_within
from ehr_magic.agent import context
from ehr_magic.agent.context import index_columns
from ehr_magic.agent.table_choice import TablePicker, shared_columns
from ehr_magic.llm import LLMClient, resolve_settings, window
from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens
from ehr_magic.llm.window import ContextWindow
from fake_llm import FakeReply

POTASSIUM = "What was the last potassium value of patient 10002428 during their last hospital visit?"


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


@pytest.fixture(autouse=True)
def fresh_windows():
    window.forget()  # each fake server is a new endpoint, but keep tests independent anyway
    yield
    window.forget()


def agent_on(ehr, llm=None, **settings) -> Agent:
    return Agent(ehr, llm, settings=AgentSettings(**{"timeout": 5.0, **settings}), tools=skills.namespace(ehr),
                 skill_cards=skills.prompt_section)


def test_the_window_comes_from_the_server_then_the_settings(fake_llm, monkeypatch, ehr) -> None:
    fake_llm.context_window = 4096
    with LLMClient(resolve_settings(), audit=False) as llm:
        found = agent_on(ehr, llm).context_window()
    assert (found.tokens, found.source) == (4096, "llama.cpp /props")
    assert all(r.method != "POST" for r in fake_llm.requests)  # discovery sent nothing to chat
    monkeypatch.setenv("EHR_MAGIC_CONTEXT_WINDOW", "6000")
    with LLMClient(resolve_settings(), audit=False) as llm:
        assert agent_on(ehr, llm).context_window().tokens == 6000


def test_a_server_that_says_nothing_gets_the_local_default(fake_llm, ehr) -> None:
    fake_llm.context_window = None
    with LLMClient(resolve_settings(), audit=False) as llm:
        found = agent_on(ehr, llm).context_window()
    assert found.tokens == window.DEFAULT_LOCAL_WINDOW and "default" in found.source


def test_a_bad_window_setting_is_one_sentence(fake_llm, monkeypatch) -> None:
    monkeypatch.setenv("EHR_MAGIC_CONTEXT_WINDOW", "lots")
    with pytest.raises(ehr_magic.errors.ConfigError, match="context_window.*whole number of tokens"):
        resolve_settings()


def test_a_row_number_every_table_has_is_said_once_by_the_index(ehr) -> None:
    system = context.system_prompt(ehr)
    described = context.table_details(ehr, ["labevents", "admissions"])
    assert "\nEvery table has row_id (Row number).\n" in system
    # the plain row number is not said again; a row number that says more (what points to it) is
    assert "- row_id: Row number.\n" not in described
    assert "- row_id: Row number; cost.event_id points here" in described


def test_the_system_prompt_indexes_every_table_and_the_question_describes_its_own(ehr) -> None:
    prompt = agent_on(ehr).prompt(POTASSIUM, window=ContextWindow(8192, "test"))
    system, user = (m["content"] for m in prompt.messages)
    shared = shared_columns(ehr)  # the columns every table has (row_id), said once
    assert shared == ("row_id",) and "\nEvery table has row_id (Row number).\n" in system
    for table in ehr.tables():  # the one-line index: every table with its other columns
        assert f"\n{table}: {index_columns(ehr, table, shared)}\n" in system
    assert "## labevents" in user and "## d_labitems" in user  # what the question needs, in full
    # the spine, chosen because most questions pass through it, described after what the question
    # needs (the window has room for it here)
    assert "## admissions" in user and user.index("## admissions") > user.index("## labevents"), prompt.tables
    assert "## labevents" not in system  # full descriptions travel with the question
    assert {"labevents", "d_labitems", "admissions"} <= set(prompt.tables[:5]), prompt.tables  # ranked first


def test_short_stored_labels_and_the_tables_they_need_are_chosen(ehr) -> None:
    picker = TablePicker(ehr)
    # 'mch' is a whole lab label (too short to count as a word inside values)
    mch = picker.choose("What was the last mch value of patient 10004733 on the current hospital visit?")
    assert {"d_labitems", "labevents"} <= set(mch.tables)
    # 'lr' is an ICU item: the item dictionary brings its event tables, and they the ICU stays
    lr = picker.choose("Tell me, was lr given to patient 10013049 on 06/23/2100?")
    assert {"d_items", "inputevents", "icustays"} <= set(lr.tables)
    assert lr.tables.index("inputevents") < lr.tables.index("icustays")  # the second hop ranks after the first


def test_a_whole_stored_value_of_several_words_outranks_words_scattered_over_long_titles(ehr) -> None:
    # 'urea nitrogen' is a lab label; 'percentile', 'age', 'encounter' are words of some of the
    # 100k diagnosis titles, each of a different title
    choice = TablePicker(ehr).choose("What percentile is 13.0 urea nitrogen in a patient of the same age as "
                                     "patient 10022017 on their last hospital encounter?")
    assert choice.scores["d_labitems"] > choice.scores.get("d_icd_diagnoses", 0.0), choice.scores
    assert choice.tables.index("labevents") < choice.tables.index("d_icd_diagnoses"), choice.tables


def test_a_value_counts_by_how_much_of_it_the_question_says() -> None:
    from ehr_magic.agent.table_choice import _ValueColumn
    from ehr_magic.linking.lookup import Vocabulary

    column = _ValueColumn(Vocabulary.build(["Other endoscopy of small intestine", "Other", "Troponin T", "PTT",
                                            "Insertion of IV line into small vein", "Potassium, whole blood"]))
    assert column.coverage({"other", "endoscopy", "of", "small", "intestine"}) == 1.0  # grammar inside a value
    assert column.coverage({"other"}) == 0.0  # but never alone
    assert column.coverage({"troponin", "t"}) == 1.0 and column.coverage({"ptt"}) == 1.0
    assert column.coverage({"iv"}) == 0.0  # a short word inside a title says nothing
    assert 0.3 < column.coverage({"potassium"}) < 1.0  # part of a value: a share


def test_a_unit_of_measure_says_little_of_the_table_and_less_the_more_tables_store_it() -> None:
    from ehr_magic.agent.loop import linked_tables
    from ehr_magic.linking.question import LinkedTerm, Linking, StoredValue

    measured = ["chartevents", "d_items", "inputevents", "labevents"]
    drugs = ["d_items", "emar", "pharmacy", "prescriptions"]
    linking = Linking(terms=(
        LinkedTerm("units", tuple(StoredValue(t, "unit", "units", 100.0) for t in measured)),
        LinkedTerm("mg/dl", (StoredValue("labevents", "valueuom", "mg/dL", 100.0),)),
        LinkedTerm("norepinephrine", tuple(StoredValue(t, "name", "Norepinephrine", 100.0) for t in drugs))))
    sure, _ = linked_tables(linking, sorted({*measured, *drugs}))
    assert sure["labevents"] == 0.5  # a unit one table stores: half as sure as a name
    assert sure["chartevents"] == sure["inputevents"] == 0.25  # one that four tables store: less still
    # a drug's name stored in four tables names each of them: it is what their rows are about
    assert sure["emar"] == sure["pharmacy"] == sure["prescriptions"] == sure["d_items"] == 1.0


def test_wards_and_units_find_the_transfers_not_a_unit_of_measure(ehr) -> None:
    # 'units' is stored whole in labevents.valueuom; here it means the care units a patient passed through
    prompt = agent_on(ehr).prompt("Which wards and units did patient 10006053 pass through during their last "
                                  "hospital visit?", window=ContextWindow(8192, "test"))
    assert prompt.tables[0] == "transfers", prompt.tables


def test_a_table_that_prices_events_by_their_row_number_is_described_only_when_asked_for(ehr) -> None:
    # cost refers to a diagnosis, procedure, lab or prescription row by its row_id: it is a part of those
    # events, listed with them, and described in full only for a question about costs
    for tokens in (8192, 4096):
        fitted = ContextWindow(tokens, "test")
        prompt = agent_on(ehr).prompt("How many times was patient 10021487 diagnosed with hypertension?",
                                      window=fitted)
        full = prompt.tables[:prompt.layout.tables]
        assert "diagnoses_icd" in full and "cost" not in full, (tokens, prompt.tables)
        assert "cost" in prompt.tables, prompt.tables
        prompt = agent_on(ehr).prompt("What was the total cost of patient 10021487's hypertension diagnoses?",
                                      window=fitted)
        assert "cost" in prompt.tables[:prompt.layout.tables], (tokens, prompt.tables)


def test_a_death_question_describes_patients_and_visits_not_a_table_whose_prose_says_happen(mimic_demo_db) -> None:
    # MIMIC-IV's emar says what happened at each administration; 'did it happen' names no table
    with ehr_magic.connect(mimic_demo_db) as handle:
        prompt = agent_on(handle).prompt("Has patient 10002930 died, and if so did it happen in hospital?",
                                         window=ContextWindow(4096, "test"))
        assert set(prompt.tables[:prompt.layout.tables]) == {"admissions", "patients"}, prompt.tables


def test_a_small_window_keeps_the_visits_a_question_speaks_of_before_tables_a_prose_word_brought(ehr) -> None:
    # the 'last hospital visit' is an admissions row: at 4k it is described in full, ahead of the ICU intake
    # and output tables that only the word 'measurement' brought; a question that names no visit leaves
    # the visits in a line after the tables it needs
    small = ContextWindow(4096, "test")
    for question in ("What was patient 10005909's weight during the last measurement during the last hospital visit?",
                     "How many hours have passed since patient 10039831's first creatinine test in this hospital "
                     "encounter?"):
        prompt = agent_on(ehr).prompt(question, window=small)
        full = prompt.tables[:prompt.layout.tables]
        assert "admissions" in full, prompt.tables
        assert not {"inputevents", "outputevents"} & set(full), prompt.tables
    prompt = agent_on(ehr).prompt("What was the last recorded weight of patient 10005909 in 11/this year?",
                                  window=small)
    assert prompt.tables[:2] == ["d_items", "chartevents"], prompt.tables
    assert "admissions" in prompt.tables[prompt.layout.tables:], prompt.tables


def test_the_schema_share_holds_the_chosen_tables_in_a_line_and_the_best_few_in_full() -> None:
    full, brief = [300, 300, 300], [50, 50, 50]
    assert tables_within(full, brief, 2000) == (2, 1)  # 700 tokens: two in full, the third in a line
    assert tables_within(full, brief, 1000) == (1, 1)  # 350: the best one in full, the last line gives way
    # wide tables (OMOP's): the last lines give way until the best few are in full
    assert tables_within([300] * 5, [100] * 5, 2000) == (2, 1)
    assert tables_within(full, [400, 400, 400], 2000) == (1, 0)  # lines that do not fit are dropped, worst first
    assert tables_within([], [], 2000) == (0, 0)
    # the tables a question needs in full come before the less likely ones in a line
    assert tables_within([150] * 6, [60] * 6, 2200) == (4, 2)
    assert tables_within([150] * 6, [60] * 6, 2200, needed=5) == (5, 0)


def test_a_4k_window_keeps_the_needed_tables_and_drops_examples_first(ehr) -> None:
    small = ContextWindow(4096, "test")
    prompt = agent_on(ehr, shots=4).prompt(POTASSIUM, window=small)
    assert estimate_prompt_tokens(prompt.messages) <= 4096 - 2 * reply_reserve(4096)  # room for a step too
    big = agent_on(ehr, shots=4).prompt(POTASSIUM, window=ContextWindow(32_768, "test"))
    assert len(prompt.example_ids) < len(big.example_ids) == 4  # examples went first
    assert "d_labitems" in prompt.tables  # where 'potassium' is stored stayed
    assert prompt.tables == big.tables[:len(prompt.tables)]  # the best-scored tables, in order
    # the best table keeps its full description; the next ones get one line each rather than nothing
    full, brief = prompt.tables[:prompt.layout.tables], prompt.tables[prompt.layout.tables:]
    user = prompt.messages[1]["content"]
    assert full and brief and "Maybe needed too" in user
    assert all(f"## {t}" in user for t in full) and not any(f"## {t}" in user for t in brief)
    assert all(f"\n- {t}: " in user for t in brief)


def test_the_system_message_gives_up_the_index_columns_then_the_table_conventions_then_table_names() -> None:
    names = [10] * 100  # a hundred tables of 10 tokens each: 1000 tokens of names

    def tokens(columns: bool, conventions: bool, listed: int | None) -> int:
        # index columns 400, table conventions 800, the rest of the message 200
        return 200 + sum(names[:listed]) + 400 * columns + 800 * conventions

    assert system_form(tokens, int(2400 / SYSTEM_SHARE), names) == (True, True, None)
    assert system_form(tokens, int(2000 / SYSTEM_SHARE), names) == (False, True, None)
    assert system_form(tokens, int(1600 / SYSTEM_SHARE), names) == (True, False, None)  # the columns come back
    assert system_form(tokens, int(1200 / SYSTEM_SHARE), names) == (False, False, None)
    assert system_form(tokens, int(705 / SYSTEM_SHARE), names) == (False, False, 50)  # the names that fit
    assert system_form(tokens, int(150 / SYSTEM_SHARE), names) == (False, False, 0)


def test_a_warehouse_of_many_tables_names_those_most_joined_to_and_says_where_the_others_are(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE patient_dim AS SELECT 'P' || range AS patient_key, range % 2 AS sex_c FROM range(40)")
        for n in range(360):
            con.execute(f"CREATE TABLE flowsheet_group_{n:03d} AS SELECT 'P' || (range % 40) AS patient_key, "
                        f"range * {n + 1} AS measured_value FROM range(30)")
        con.execute("CREATE TABLE hemoglobin_results AS SELECT 'P' || (range % 40) AS patient_key, "
                    "7 + range / 10 AS hemoglobin_g_dl FROM range(50)")
    small = ContextWindow(4096, "test")
    with ehr_magic.connect(db) as ehr:
        names_alone = estimate_prompt_tokens([{"role": "system", "content": ", ".join(ehr.tables())}])
        assert names_alone > SYSTEM_SHARE * small.tokens  # the names alone would crowd the question out
        agent = agent_on(ehr)
        first = agent.prompt("What was the lowest hemoglobin of patient P7?", window=small)
        second = agent.prompt("How many patients are there?", window=small)
        assert context.table_index(ehr, columns=False, listed=0).startswith("The 362 tables are not listed here: ")
    system = first.messages[0]["content"]
    assert system == second.messages[0]["content"]  # the same prefix for every question
    assert estimate_tokens(system) <= SYSTEM_SHARE * small.tokens
    listed = first.layout.index_tables
    assert listed is not None and 0 < listed < 362
    assert f"{listed} of the 362 tables, those most joined to first: patient_dim, " in system
    assert "ehr.tables() names them all" in system
    assert "hemoglobin_results" in first.tables[:first.layout.tables]  # the table the question needs, in full
    assert "## hemoglobin_results" in first.messages[1]["content"]


def test_the_conventions_of_a_question_are_those_of_its_tables_and_of_its_rare_words() -> None:
    from ehr_magic.agent.table_choice import conventions_for

    tables = ["inputevents", "cost", "microbiologyevents", "transfers"]
    columns = {"inputevents": ["row_id", "totalamount"], "cost": ["row_id", "cost"],
               "microbiologyevents": ["row_id", "spec_type_desc"], "transfers": ["row_id", "careunit"]}
    rules = ["Now is 2100-12-31.", "Intake means inputevents (volume in totalamount).",
             "Costs - each cost row prices one event.",
             "Microbiology - spec_type_desc is the specimen; care units are transfers.careunit."]
    assert conventions_for(tables, {"inputevents"}, "How much?", rules, columns) == [rules[1]]
    assert conventions_for(tables, {"cost"}, "How much?", rules, columns) == [rules[2]]
    # named by a column of its own (the rule names only transfers as a table)
    assert conventions_for(tables, {"microbiologyevents"}, "Which organism?", rules, columns) == [rules[3]]
    # no table shown, but the question says a word only one convention says
    assert conventions_for(tables, set(), "What was the total intake yesterday?", rules, columns) == [rules[1]]
    assert rules[0] not in conventions_for(tables, set(tables), "Now?", rules, columns)  # general: in the system


def test_a_4k_window_moves_the_conventions_of_tables_to_the_questions_that_show_them(ehr) -> None:
    small, big = ContextWindow(4096, "test"), ContextWindow(8192, "test")
    question = "What was the last heart rate of patient 10021487 today?"
    prompt = agent_on(ehr, shots=4).prompt(question, window=small)
    system, user = prompt.messages[0]["content"], prompt.messages[1]["content"]
    assert "Vital signs are chartevents rows" not in system and "Vital signs are chartevents rows" in user
    assert "Conventions of the dataset for these tables:" in user
    assert "Now is 2100-12-31" in system  # a convention that names no table stays for every question
    assert "Costs - each cost row" not in user  # no cost table in full: not its convention either
    other = agent_on(ehr, shots=4).prompt(POTASSIUM, window=small)
    assert other.messages[0]["content"] == system  # one system message for every question
    assert "Lab tests are labevents rows" in other.messages[1]["content"]
    # without it, the system message took most of the window and left room for fewer tables in full
    assert prompt.layout.tables >= 3, prompt.tables
    wide = agent_on(ehr, shots=4).prompt(question, window=big)  # a window with room keeps them all in the system
    assert "Vital signs are chartevents rows" in wide.messages[0]["content"]
    assert "Conventions of the dataset" not in wide.messages[1]["content"]


def test_a_4k_prompt_says_each_join_once(ehr) -> None:
    prompt = agent_on(ehr, shots=4).prompt(POTASSIUM, window=ContextWindow(4096, "test"))
    user = prompt.messages[1]["content"]
    assert {"d_labitems", "labevents"} <= set(prompt.tables)
    # labevents's itemid column says it joins d_labitems; neither table's joins line says it again
    assert "- itemid: Test; joins to d_labitems." in user
    assert user.count("labevents ON itemid") + user.count("d_labitems ON itemid") == 0
    # labevents -> admissions ON hadm_id: said by one of the two tables (in full or in a line), whichever comes first
    joins = {}
    for block in user.split("\n\n"):
        for line in block.splitlines():
            name = line[3:] if line.startswith("## ") else line[2:] if line.startswith("- ") else ""
            table = name.split(" ")[0].split(":")[0]
            if table in ("labevents", "admissions") and (line.startswith("## ") or "Joins:" in line):
                said_in = [x for x in block.splitlines() if x.startswith("joins: ")] if line.startswith("## ") \
                    else [line.split("Joins:")[-1]]
                joins[table] = " ".join(said_in)
    said = [t for t, other in (("labevents", "admissions"), ("admissions", "labevents")) if other in joins.get(t, "")]
    assert len(said) == 1, (said, joins)
    assert user.count(" ON hadm_id") <= 2  # the spine's joins on hadm_id, said once for all their tables


def test_a_window_too_small_for_any_prompt_is_one_clear_sentence(ehr) -> None:
    with pytest.raises(PromptTooLongError) as caught:
        agent_on(ehr).prompt(POTASSIUM, window=ContextWindow(1024, "test"))
    message = str(caught.value)
    assert "The prompt needs about" in message and "window is 1,024 tokens" in message
    assert "--ctx-size" in message and "context_window" in message


def test_the_agent_sends_the_fitted_prompt_and_records_it(fake_llm, ehr) -> None:
    fake_llm.context_window = 4096
    fake_llm.enqueue("```python\nanswer = ehr.sql('SELECT count(*) AS n FROM patients')['n'][0]\n```")
    with LLMClient(resolve_settings(), audit=False) as llm:
        result = agent_on(ehr, llm).run("How many patients are there?")
    assert result.status == "answered" and result.context_window == 4096
    sent = fake_llm.chat_requests()[-1].json["messages"]
    assert estimate_prompt_tokens(sent) <= 4096 - reply_reserve(4096)
    assert "patients" in result.tables and "Tables for this question:" in sent[-1]["content"]


def test_a_window_stated_in_an_overflow_error_is_learned_and_the_question_asked_again(fake_llm, ehr) -> None:
    fake_llm.context_window = None  # the server does not say (llama-cpp-python)
    fake_llm.enqueue(FakeReply(text="This model's maximum context length is 4096 tokens. However, you requested "
                                    "7000 tokens", status=400),
                     "```python\nanswer = ehr.sql('SELECT 1').item()\n```")
    with LLMClient(resolve_settings(), audit=False, backoff_base=0.01) as llm:
        result = agent_on(ehr, llm).run(POTASSIUM)
    assert result.status == "answered" and result.context_window == 4096
    first, second = (r.json["messages"] for r in fake_llm.chat_requests() if "messages" in (r.json or {}))
    assert estimate_prompt_tokens(second) < estimate_prompt_tokens(first)
    assert estimate_prompt_tokens(second) <= 4096 - reply_reserve(4096)


def test_long_debugging_keeps_the_latest_exchange_within_the_window(fake_llm, ehr) -> None:
    fake_llm.context_window = 4096
    failing = "```python\n" + "\n".join(f"x{i} = {i}  # padding to make the reply long" for i in range(20)) + \
        "\nanswer = ehr.sql('SELECT * FROM no_such_table')\n```"
    fake_llm.enqueue(*[failing] * 4, "```python\nanswer = ehr.sql('SELECT 2').item()\n```")
    with LLMClient(resolve_settings(), audit=False) as llm:
        result = agent_on(ehr, llm, max_steps=5, debugger=False).run("How many patients are there?")
    assert result.status == "answered"
    for request in fake_llm.chat_requests():
        assert estimate_prompt_tokens(request.json["messages"]) <= 4096 - reply_reserve(4096)


@pytest.mark.parametrize("question", [
    "What's the maximum total cost of the hospital visits that involve a biopsy of kidney?",
    "What is the title of the medication that was given to patient 10014078 first via the sc route?",
    "What was the maximum value of lactate for patient 10002428 this month?",
])
def test_no_skills_for_questions_that_name_no_skill(question: str) -> None:
    assert skills.prompt_section(question, "ehrsql_mimic_iv") == ""


def test_skills_for_a_question_that_names_one() -> None:
    section = skills.prompt_section("Which ICU stays met the Sepsis-3 criteria?", "mimic_iv")
    assert "skills.sepsis3" in section


def test_a_question_gets_the_same_prompt_in_every_process(ehrsql_db: Path) -> None:
    # Python salts its string hashes per process, so a set's order changes from one process to the
    # next: the tables a question ties on must come out in the same order whatever the salt
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, sys, ehr_magic\n"
        "from ehr_magic.agent import Agent\n"
        "from ehr_magic.llm.window import ContextWindow\n"
        "with ehr_magic.connect(sys.argv[1]) as ehr:\n"
        "    agent = Agent(ehr, None)\n"
        "    prompts = [agent.prompt(q, window=ContextWindow(8192, 'test')) for q in sys.argv[2:]]\n"
        "print(json.dumps([[p.tables, p.messages] for p in prompts]))\n")
    questions = ["How much is changed in patient 10021487's hyaline casts levels last measured on the current "
                 "hospital visit compared to the first value measured on the current hospital visit?",
                 "Is glucose in patient 10021487 last measured on the current hospital visit less than the second "
                 "to last value measured on the current hospital visit?"]
    seen = []
    for seed in ("0", "2"):
        done = subprocess.run([sys.executable, "-c", script, str(ehrsql_db), *questions], capture_output=True,
                              text=True, check=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": seed})
        seen.append(json.loads(done.stdout))
    assert seen[0] == seen[1]
