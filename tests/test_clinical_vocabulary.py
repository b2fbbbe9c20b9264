"""Clinical shorthand in value linking: ehr.lookup, ehr.find and value hints on the real
dictionaries of the EHRSQL-2024 MIMIC-IV, MIMIC-III and eICU demos."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import ehr_magic
from ehr_magic.agent.hints import value_hints
from ehr_magic import sources
from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary, parse
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.errors import EhrMagicError


@pytest.fixture(scope="module")
def mimic_iv(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


@pytest.fixture(scope="module")
def mimic_iii(mimic_iii_demo_db: Path):
    with ehr_magic.connect(mimic_iii_demo_db) as handle:
        yield handle


@pytest.fixture(scope="module")
def eicu(eicu_demo_db: Path):
    with ehr_magic.connect(eicu_demo_db) as handle:
        yield handle


def test_packaged_vocabulary_is_versioned_data_with_ranked_meanings() -> None:
    vocabulary = clinical_vocabulary()
    assert vocabulary.version == "3" and len(vocabulary) >= 300
    assert vocabulary.expand("Hgb") == ("hemoglobin",)
    assert vocabulary.expand("k+") == ("potassium",)  # case and punctuation do not matter
    assert vocabulary.expand("Lasix") == ("furosemide",)
    assert vocabulary.expand("DEXA")[0] == "bone density scan"  # version 3: common procedures
    assert vocabulary.expand("statins")[0] == "hmg coa reductase inhibitors"  # ... and drug classes
    assert (vocabulary.kind("Lasix"), vocabulary.kind("copd"), vocabulary.kind("zzqx")) == ("drug", "dx", None)
    arf = vocabulary.expand("ARF")  # ambiguous: both meanings, kidney first
    assert arf.index("acute renal failure") < arf.index("acute respiratory failure")
    assert all(a.exact_only for a in vocabulary.alternatives("hemoglobin"))  # none, or exact ones only
    assert vocabulary.alternatives("zzqx") == []
    with pytest.raises(EhrMagicError, match="line 3"):
        parse("# version: 1\nterm\tkind\texpansions\nHb\themoglobin\n", source="x.tsv")
    with pytest.raises(EhrMagicError, match="version"):
        parse("term\tkind\texpansions\nHb\tlab\themoglobin\n", source="x.tsv")


def test_everyday_words_are_known_terms_read_as_shorthand_only_when_written_as_one() -> None:
    from ehr_magic.linking.clinical_vocabulary import everyday_words, written_as_shorthand

    assert everyday_words() and all(clinical_vocabulary().expand(word) for word in everyday_words())
    assert written_as_shorthand("afib", sentence_start=False) and written_as_shorthand("lasix", sentence_start=True)
    assert not written_as_shorthand("hit", sentence_start=False) and written_as_shorthand("HIT", sentence_start=True)
    assert not written_as_shorthand("What", sentence_start=True) and written_as_shorthand("Lasix", sentence_start=False)
    assert not written_as_shorthand("in", sentence_start=False)  # two letters in lower case: a word


def test_lab_abbreviations_find_the_spelled_out_test_mimic_iv(mimic_iv) -> None:
    hb = mimic_iv.lookup("d_labitems", "label", "Hb")
    assert hb[0] == "hemoglobin" and "hbeag" not in hb and "h" not in hb
    assert mimic_iv.lookup("d_labitems", "label", "Hgb")[:2] == ["hgb", "hemoglobin"]  # 'hgb' is stored too
    assert mimic_iv.lookup("d_labitems", "label", "Na")[0] == "sodium"
    # this database stores no plain 'potassium': the blood test comes before other specimens
    k = mimic_iv.lookup("d_labitems", "label", "K")
    assert "potassium, whole blood" in k and all("potassium" in v or v.startswith("k ") for v in k)
    assert k.index("potassium, whole blood") < k.index("potassium, urine") if "potassium, urine" in k else True
    assert mimic_iv.lookup("d_labitems", "label", "INR")[0] == "inr(pt)"
    bun = mimic_iv.lookup("d_labitems", "label", "BUN")
    assert bun[:2] == ["bun", "urea nitrogen"]  # the stored abbreviation first, then its test


def test_lab_abbreviations_find_the_spelled_out_test_mimic_iii(mimic_iii) -> None:
    assert mimic_iii.lookup("d_labitems", "label", "Hb")[0] == "Hemoglobin"
    assert mimic_iii.lookup("d_labitems", "label", "K")[0] == "Potassium"
    assert mimic_iii.lookup("d_labitems", "label", "Na")[0] == "Sodium"
    assert mimic_iii.lookup("d_labitems", "label", "BUN")[0] == "Urea Nitrogen"
    assert mimic_iii.lookup("d_labitems", "label", "INR")[0] == "INR(PT)"
    assert mimic_iii.lookup("d_items", "label", "HR")[0] == "Heart Rate"


def test_drug_abbreviations_and_brand_names_find_the_generic(mimic_iv, mimic_iii, eicu) -> None:
    assert mimic_iv.lookup("prescriptions", "drug", "ISDN")[0] == "isosorbide dinitrate"
    assert mimic_iii.lookup("prescriptions", "drug", "ISDN")[0] == "Isosorbide Dinitrate"
    assert mimic_iv.lookup("prescriptions", "drug", "Lasix")[0] == "furosemide"
    assert mimic_iii.lookup("prescriptions", "drug", "Zosyn")[0].startswith("Piperacillin-Tazobactam")
    assert "NOREPINEPHRINE" in eicu.lookup("medication", "drugname", "Levophed")
    assert eicu.lookup("medication", "drugname", "Ativan")[0] in ("ATIVAN", "Ativan")  # a stored brand stays first


def test_diagnosis_abbreviations_find_the_diagnosis(mimic_iv, mimic_iii, eicu) -> None:
    copd = mimic_iv.lookup("d_icd_diagnoses", "long_title", "COPD")
    assert all("chronic obstructive pulmonary disease" in v for v in copd[:3])
    assert "cold injury syndrome" not in copd
    pad = mimic_iv.lookup("d_icd_diagnoses", "long_title", "PAD")
    assert pad[0] == "peripheral vascular disease, unspecified"
    assert not any("brachytherapy" in v for v in pad)
    # ICD-9 names COPD 'chronic airway obstruction'; 'unspecified' marks the generic code
    assert "Chronic airway obstruction, not elsewhere classified" in mimic_iii.lookup(
        "d_icd_diagnoses", "long_title", "COPD")
    assert mimic_iii.lookup("d_icd_diagnoses", "long_title", "CHF")[0] == "Congestive heart failure, unspecified"
    assert mimic_iv.lookup("d_icd_diagnoses", "long_title", "MI")[0] == "acute myocardial infarction"
    # eICU stores the abbreviation itself: it still matches first
    assert eicu.lookup("diagnosis", "diagnosisstring", "COPD")[0] == "pulmonary|disorders of the airways|COPD"
    # an ambiguous abbreviation shows each meaning it finds
    arf = eicu.lookup("diagnosis", "diagnosisstring", "ARF")
    assert any(v.endswith("acute renal failure") for v in arf)
    assert any(v.endswith("acute respiratory failure") for v in arf)


def test_procedure_abbreviations(mimic_iv) -> None:
    assert mimic_iv.lookup("d_icd_procedures", "long_title", "ERCP")[0] == \
        "endoscopic retrograde cholangiopancreatography [ercp]"
    assert "central venous catheter placement with guidance" in mimic_iv.lookup(
        "d_icd_procedures", "long_title", "CVC")


def test_stored_abbreviations_and_plain_queries_match_as_before(mimic_iv) -> None:
    assert mimic_iv.lookup("d_labitems", "label", "ptt")[0] == "ptt"
    assert mimic_iv.lookup("d_labitems", "label", "mch")[0] == "mch"
    assert mimic_iv.lookup("d_labitems", "label", "RDW")[:2] == ["rdw", "rdw-sd"]
    vocabulary = mimic_iv.vocabulary("d_labitems", "label")
    for plain in ("reptilase time", "albumin, pleural", "lactate dehydrogenase, csf"):  # unknown to the vocabulary
        assert clinical_vocabulary().alternatives(plain) == []
        assert mimic_iv.lookup("d_labitems", "label", plain, scores=True) == vocabulary.match(plain, 5)
    for plain in ("lactate", "white blood cells", "glucose"):  # spelled out: stored abbreviations may join
        assert mimic_iv.lookup("d_labitems", "label", plain)[0] == vocabulary.match(plain, 1)[0][0] == plain
    assert "wbc" in mimic_iv.lookup("d_labitems", "label", "white blood cells")


def test_find_says_where_a_term_is_stored_and_how_it_is_spelled(mimic_iv, eicu) -> None:
    found = mimic_iv.find("Hb")
    assert found.columns == ["table", "column", "value", "score"]
    assert ("d_labitems", "label", "hemoglobin") in [row[:3] for row in found.rows()[:2]]  # d_items has it too
    assert found["score"].to_list() == sorted(found["score"].to_list(), reverse=True)
    text = repr(found)
    assert text.startswith("Stored values close to 'Hb'") and "d_labitems" in text and "hemoglobin" in text
    copd = mimic_iv.find("COPD", k=5)
    assert set(copd["table"]) == {"d_icd_diagnoses"}
    assert "chronic obstructive pulmonary disease, unspecified" in repr(copd)  # long values shown whole
    lasix = eicu.find("Lasix")
    assert ("medication", "drugname") in set(zip(lasix["table"], lasix["column"]))
    assert any(v.upper().startswith("FUROSEMIDE") for v in lasix["value"])
    nothing = mimic_iv.find("zzqxjw")
    assert nothing.is_empty() and repr(nothing).startswith("No stored value close to 'zzqxjw' in 21 lookup columns")
    # only lookup columns are searched: never patient-level data
    searched = set(mimic_iv.lookup_columns())
    assert searched == {(t, c) for t, c in mimic_iv.knowledge.vocabulary_columns()
                        if mimic_iv.columns(t)[c].startswith("VARCHAR")}
    assert set(zip(mimic_iv.find("m")["table"], mimic_iv.find("m")["column"])) <= searched


def test_find_never_offers_personal_data_of_a_csv_folder(tmp_path: Path) -> None:
    folder = tmp_path / "clinic"
    folder.mkdir()
    tests = ["Hemoglobin", "Potassium", "Sodium", "Creatinine", "Glucose", "Platelet count"]
    with open(folder / "lab_results.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["result_id", "person_id", "test", "value"])
        for i in range(600):
            writer.writerow([i, i % 40, tests[i % len(tests)], 10 + i % 7])
    with open(folder / "people.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["person_id", "last_name", "city"])
        for i in range(40):  # names repeat like a vocabulary would, and one is spelled like a test
            writer.writerow([i, ["Hemoglobin", "Smith", "Jones", "Brown"][i % 4], ["Leeds", "York"][i % 2]])
    database = tmp_path / "clinic.duckdb"
    sources.load("csv", [folder], database)
    with ehr_magic.connect(database) as ehr:
        assert ("lab_results", "test") in ehr.lookup_columns()
        assert all(table != "people" for table, _ in ehr.lookup_columns())
        found = ehr.find("Hb")
        assert found.row(0)[:3] == ("lab_results", "test", "Hemoglobin")
        assert "people" not in set(found["table"])


def test_value_hints_understand_shorthand(mimic_iv) -> None:
    sql_code = "ehr.sql(\"SELECT * FROM d_labitems WHERE label = 'Hb'\")"
    (hint,) = value_hints(sql_code, mimic_iv)
    assert (hint.table, hint.column, hint.closest[0]) == ("d_labitems", "label", "hemoglobin")
    polars_code = 'ehr.table("prescriptions").filter(pl.col("drug") == "ISDN")'
    (hint,) = value_hints(polars_code, mimic_iv)
    assert hint.closest[0] == "isosorbide dinitrate"
    assert "closest stored values: 'isosorbide dinitrate'" in hint.describe()


@pytest.mark.parametrize("query", ["creatinine", "potassium", "hemoglobin", "Hb", "K", "heart rate", "COPD"])
def test_the_best_value_is_the_same_whatever_k(mimic_iii, query: str) -> None:
    # A place kept for another meaning of a term (or its stored abbreviation, 'Cr' for
    # 'creatinine') never takes the best value's place: k=1 is the first of k=5.
    for table, column in (("d_labitems", "label"), ("d_items", "label"), ("d_icd_diagnoses", "long_title")):
        five = mimic_iii.lookup(table, column, query, k=5)
        assert mimic_iii.lookup(table, column, query, k=1) == five[:1], (table, query)


FIND_QUERIES = ("Hb", "COPD", "heart failure", "hypertension", "potassium", "Lasix", "appendectomy", "CABG",
                "chronic kidney disease", "tbili", "ventilation", "sepsis", "m", "zzqxjw", "diabetes mellitus type 2")


def test_value_index_built_at_once_finds_what_the_one_value_at_a_time_index_found(
        ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vocabulary_reference import built_one_value_at_a_time

    with ehr_magic.connect(ehrsql_db) as ehr:
        values = ehr._distinct_values("d_icd_diagnoses", "long_title")
        found = {query: ehr.find(query).rows() for query in FIND_QUERIES}
        looked_up = {query: ehr.lookup("d_icd_procedures", "long_title", query, scores=True)
                     for query in FIND_QUERIES}
    built, reference = Vocabulary.build(values), built_one_value_at_a_time(values)
    for field in ("values", "normalised", "compact", "repeated", "words"):
        assert getattr(built, field) == getattr(reference, field), field
    assert all(np.array_equal(a, b) for a, b in zip(built.postings, reference.postings, strict=True))
    assert np.array_equal(built.idf, reference.idf) and np.array_equal(built.word_order, reference.word_order)
    monkeypatch.setattr(Vocabulary, "build", staticmethod(built_one_value_at_a_time))
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert {query: ehr.find(query).rows() for query in FIND_QUERIES} == found
        assert {query: ehr.lookup("d_icd_procedures", "long_title", query, scores=True)
                for query in FIND_QUERIES} == looked_up


def test_a_term_spelled_out_says_its_kind_but_a_phrase_of_two_kinds_says_none() -> None:
    vocabulary = clinical_vocabulary()
    assert vocabulary.spelled_kinds("How many patients have type 2 diabetes?") == {"dx"}  # begins an expansion
    assert vocabulary.spelled_kinds("Was furosemide given?") == {"drug"}  # a whole one-word expansion
    assert vocabulary.spelled_kinds("What type of admission was it?") == set()  # one word that only begins one
    assert "drug" not in vocabulary.spelled_kinds("sodium bicarbonate")  # a lab test and a drug alike
    text = "term\tkind\texpansions\n# version: 1\nT2\tdx\ttype 2 diabetes mellitus\nX\tdrug\ttype 2 fixer\n"
    assert parse(text, source="test").spelled_kinds("type 2 diabetes") == {"dx"}
    assert parse(text, source="test").spelled_kinds("type 2") == set()
