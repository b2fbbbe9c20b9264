"""Renamed copies of the EHRSQL-2024 database (``ehr_magic.eval.renamed``): the renamed gold SQL
gives, on the renamed copy, the same answer as the original SQL on the original database."""

from __future__ import annotations

import csv
import json
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from datapaths import EHRSQL_DIR, EHRSQL_SQLITE
from ehr_magic.errors import DataSourceError
from ehr_magic.eval import renamed

SAMPLE = 150  # questions per style, drawn from train and valid
_NOW = re.compile("current_time", re.IGNORECASE)  # EHRSQL's scorer runs the SQL at this time
EHRSQL_NOW = "'2100-12-31 23:59:00'"


def gold_items() -> list[tuple[str, str]]:
    items = []
    for split in renamed.SPLITS:
        labels = json.loads((EHRSQL_DIR / split / "label.json").read_text())
        items += [(qid, sql) for qid, sql in labels.items() if sql != "null"]
    random.Random(22).shuffle(items)
    return items[:SAMPLE]


@pytest.fixture(scope="module", params=renamed.STYLES)
def copy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    names = renamed.naming(request.param, renamed.source_columns(EHRSQL_SQLITE))
    path = tmp_path_factory.mktemp(request.param) / "renamed.sqlite"
    renamed.build_sqlite(EHRSQL_SQLITE, names, path)
    return names, path


def rows(path: Path, sql: str) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(map(repr, con.execute(_NOW.sub(EHRSQL_NOW, sql)).fetchall()))
    finally:
        con.close()


def test_renamed_gold_sql_gives_the_same_answers(copy) -> None:
    names, path = copy
    new_tables = set(names.loaded.values())
    new_columns = {c for columns in names.columns.values() for c in columns.values()}
    old_columns = {c for columns in names.columns.values() for c in columns} - new_columns
    nonempty = 0
    for qid, sql in gold_items():
        sql_renamed = renamed.rename_sql(sql, names)
        tree = sqlglot.parse_one(sql_renamed, read="sqlite")
        assert {t.name for t in tree.find_all(exp.Table)} <= new_tables, qid
        assert not {c.name for c in tree.find_all(exp.Column)} & old_columns, (qid, sql_renamed)
        expected = rows(EHRSQL_SQLITE, sql)
        assert rows(path, sql_renamed) == expected, (qid, sql, sql_renamed)
        nonempty += bool(expected)
    assert nonempty > SAMPLE // 2  # the comparison is not between empty answers


def test_no_mimic_name_survives_and_every_table_has_a_dense_row_number(copy) -> None:
    names, path = copy
    old_tables = set(names.tables)
    assert not old_tables & set(names.loaded.values())
    con = sqlite3.connect(path)
    for table in names.loaded.values():
        columns = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
        assert columns[0] == names.row_number and not {"row_id", "subject_id", "hadm_id", "itemid"} & set(columns)
        count, low, high, distinct = con.execute(
            f'SELECT count(*), min("{names.row_number}"), max("{names.row_number}"), '
            f'count(DISTINCT "{names.row_number}") FROM "{table}"').fetchone()
        assert (low, high, distinct) == (0, count - 1, count), table
    # values that named MIMIC tables name the renamed tables
    kinds = {v for (v,) in con.execute(f'SELECT DISTINCT "{names.columns["cost"]["event_type"]}" '
                                       f'FROM "{names.loaded["cost"]}"')}
    assert kinds and kinds <= set(names.loaded.values())


def test_csv_folder_and_truth(copy, tmp_path: Path) -> None:
    names, path = copy
    out = tmp_path / "copy"
    renamed.write_csv_folder(path, names, out)
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(f"{stem}.csv" for stem in names.tables.values())
    with open(out / f"{names.tables['labevents']}.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == list(names.columns["labevents"].values())

    dataset = tmp_path / "ehrsql"
    for split in renamed.SPLITS:  # a few questions per split keep this quick
        labels = json.loads((EHRSQL_DIR / split / "label.json").read_text())
        (dataset / split).mkdir(parents=True)
        (dataset / split / "label.json").write_text(json.dumps(dict(list(labels.items())[:5])))
    facts = renamed.truth(names, EHRSQL_DIR / "tables.json", dataset)
    con = sqlite3.connect(path)
    for key in facts["foreign_keys"]:  # every renamed foreign key names real columns
        for table, column in ((key["table"], key["column"]), (key["ref_table"], key["ref_column"])):
            assert column in [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')], key
    assert sum(k["polymorphic"] for k in facts["foreign_keys"]) == 4  # charges -> four event tables' rows
    assert all(len(facts["questions"][s]) == 5 for s in renamed.SPLITS)
    question = next(iter(facts["questions"]["train"].values()))
    assert question["tables"] and set(question["tables"]) <= set(names.loaded.values())


def test_unknown_style_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="choose one of descriptive, camel"):
        renamed.naming("snake", renamed.source_columns(EHRSQL_SQLITE))
    done = subprocess.run([sys.executable, "-m", "ehr_magic.eval.renamed", "--style", "camel", "--out",
                           str(tmp_path / "x"), "--source", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "mimic_iv.sqlite" in done.stderr
    assert not (tmp_path / "x").exists()
