"""User skills: literals become parameters, versions are kept, tests travel with the skill."""

from __future__ import annotations

import sqlite3

import pytest

from ehr_magic import skills
from ehr_magic.skills import SkillError, user
from ehr_magic.skills.testing import build, icu_patient, merge

CELL = '''df = ehr.sql("SELECT max(valuenum) AS peak FROM labevents WHERE itemid = 50813 AND subject_id = 1")
answer = float(df["peak"][0])'''
CARD = {"title": "Peak lactate", "purpose": "Highest lactate of one patient.", "keywords": ["lactate peak"],
        "source": "analyst", "output": "a number (mmol/L)"}


@pytest.fixture
def ehr(tmp_path):
    data = merge(icu_patient(labs=[(50813, 2, 4.2), (50813, 5, 2.0)]),
                 icu_patient(subject_id=2, hadm_id=20, stay_id=200, labs=[(50813, 3, 1.1)]))
    db = build(tmp_path / "e.duckdb", data)
    yield db
    db.close()


@pytest.fixture
def store(tmp_path):
    return tmp_path / "skills.sqlite"


def test_parametrize_replaces_literals():
    code = "x = 10000032\nrows = [1, 2]\ny = f'id {10000032}'\nz = -1.5"
    out = user.parametrize(code, {"subject_id": 10000032, "ids": [1, 2], "shift": -1.5})
    assert out == "x = subject_id\nrows = ids\ny = f'id {subject_id}'\nz = shift"
    sql = user.parametrize("ehr.sql(\"SELECT * FROM t WHERE label = 'Lactate' AND subject_id = 12 AND x = 123\")",
                           {"sid": 12, "lab": "Lactate"})
    assert sql == "ehr.sql(f\"SELECT * FROM t WHERE label = '{lab}' AND subject_id = {sid} AND x = 123\")"
    assert user.parametrize("a = True\nb = 1", {"n": 1}) == "a = True\nb = n"  # True is not 1


def test_parametrize_errors():
    with pytest.raises(SkillError, match="do not appear"):
        user.parametrize("x = 1", {"n": 2})
    with pytest.raises(SkillError, match="already uses"):
        user.parametrize("n = 1", {"n": 1})
    with pytest.raises(SkillError, match="not allowed"):
        user.parametrize("x = 1", {"ehr": 1})
    with pytest.raises(SkillError, match="not valid Python"):
        user.parametrize("x = (", {"n": 1})


def test_find_literals_lists_values_also_inside_sql():
    found = user.find_literals('"""doc"""\n' + CELL)
    values = [f["value"] for f in found]
    assert 50813 in values and 1 in values and "doc" not in values
    assert any(f["in_string"] and f["value"] == 50813 for f in found)


def test_save_load_run_versions_delete(ehr, store):
    card = user.save_skill("lactate_peak", CELL, card=CARD, params={"subject_id": 1},
                           tests=[{"params": {"subject_id": 2}, "expected": 1.1}], path=store, schema="mimic_iv")
    assert card.kind == "user" and card.version == 1
    assert card.signature == "(ehr, *, subject_id=1)"
    fn = skills.get("lactate_peak", path=store)
    assert fn(ehr) == 4.2 and fn(ehr, subject_id=2) == 1.1
    assert user.run_tests("lactate_peak", ehr, path=store) == [{"params": {"subject_id": 2}, "ok": True, "problem": ""}]
    with pytest.raises(SkillError, match="no parameter"):
        fn(ehr, patient=2)

    again = user.save_skill("lactate_peak", CELL.replace("max(", "min("), card={**CARD, "title": "Lowest lactate"},
                            params={"subject_id": 1}, tests=[], path=store, schema="mimic_iv")
    assert again.version == 2
    assert [c.version for c in user.list_user_skills(path=store, all_versions=True)] == [1, 2]
    assert skills.get("lactate_peak", path=store)(ehr) == 2.0
    assert skills.get("lactate_peak", version=1, path=store)(ehr) == 4.2
    assert skills.card("lactate_peak", path=store).title == "Lowest lactate"

    assert user.delete_skill("lactate_peak", version=2, path=store) == 1
    assert skills.get("lactate_peak", path=store)(ehr) == 4.2
    assert user.delete_skill("lactate_peak", path=store) == 1
    assert user.list_user_skills(path=store) == []
    with pytest.raises(SkillError, match="No user skill"):
        user.delete_skill("lactate_peak", path=store)


def test_user_skills_are_searchable_and_in_the_namespace(ehr, store):
    user.save_skill("lactate_peak", CELL, card=CARD, params={"subject_id": 1}, tests=[], path=store, schema="mimic_iv")
    assert skills.search("peak lactate", path=store)[0].name == "lactate_peak"
    assert "lactate_peak" in {c.name for c in skills.catalog(path=store)}
    assert "lactate_peak" not in {c.name for c in skills.catalog(schema="ehrsql_mimic_iv", path=store)}
    section = skills.prompt_section("what was the peak lactate of patient 2", "mimic_iv", path=store)
    assert "skills.lactate_peak(ehr, *, subject_id=1)" in section
    s = skills.namespace(ehr, path=store)["skills"]
    assert s.lactate_peak(subject_id=2) == 1.1
    assert "Code:" in str(s.card("lactate_peak"))


def test_default_store_is_in_the_user_data_folder(ehr, isolated_user_dirs):
    user.save_skill("lactate_peak", CELL, card=CARD, params={"subject_id": 1}, tests=[])
    assert (isolated_user_dirs / "data" / "skills.sqlite").exists()
    assert skills.get("lactate_peak")(ehr) == 4.2


def test_failing_tests_block_saving(ehr, store):
    with pytest.raises(SkillError, match="not saved: 1 test"):
        user.save_skill("lactate_peak", CELL, card=CARD, params={"subject_id": 1},
                        tests=[{"params": {"subject_id": 2}, "expected": 9.9}], path=store, verify_with=ehr)
    assert user.list_user_skills(path=store) == []


def test_user_skill_errors_name_the_line(ehr, store):
    user.save_skill("broken", "x = 1\ny = x / 0", card=CARD, params={"n": 1}, tests=[], path=store)
    with pytest.raises(SkillError, match=r"broken \(v1\) failed: ZeroDivisionError at line 2"):
        skills.get("broken", path=store)(ehr)


@pytest.mark.parametrize(("name", "message"), [("sofa", "built-in"), ("Bad Name", "lower-case identifier"),
                                                ("calc", "built-in")])
def test_bad_names(name, message, store):
    with pytest.raises(SkillError, match=message):
        user.save_skill(name, CELL, card=CARD, params={}, tests=[], path=store)


def test_bad_tests_and_cards(store):
    with pytest.raises(SkillError, match="expected"):
        user.save_skill("a", CELL, card=CARD, params={}, tests=[{"params": {}}], path=store)
    with pytest.raises(SkillError, match="unknown parameter"):
        user.save_skill("a", CELL, card=CARD, params={}, tests=[{"params": {"x": 1}, "expected": 1}], path=store)
    with pytest.raises(SkillError, match="purpose"):
        user.save_skill("a", CELL, card={"title": "x"}, params={}, tests=[], path=store)


def test_foreign_files_are_refused(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_text("hello")
    with pytest.raises(SkillError, match="not a SQLite file"):
        user.save_skill("a", CELL, card=CARD, params={}, tests=[], path=text)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(SkillError, match="not an ehr-magic skill store"):
        user.list_user_skills(path=other)
    assert user.list_user_skills(path=tmp_path / "missing.sqlite") == []
    assert not (tmp_path / "missing.sqlite").exists()
