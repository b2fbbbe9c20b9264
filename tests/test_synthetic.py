"""The synthetic MIMIC-IV-shaped generator: deterministic, sound, shaped like MIMIC-IV.

Databases are generated into temporary folders; the official MIMIC-IV demo headers in
../shared/data are read only to check column names and order.
"""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import duckdb
import pytest
from datapaths import CHARTEVENTS_RECONSTRUCTED, MIMIC_IV_DEMO, need_shared

from ehr_magic.sources import synthetic
from ehr_magic.errors import DataSourceError

NOW = dt.datetime(2180, 1, 1)

# Types of the official MIMIC-IV 2.2 PostgreSQL build, as DuckDB names them
# (PostgreSQL FLOAT/DOUBLE PRECISION -> DOUBLE, REAL -> FLOAT, CHAR/VARCHAR/TEXT -> VARCHAR).
OFFICIAL_TYPES = """
patients: subject_id INTEGER, gender VARCHAR, anchor_age SMALLINT, anchor_year SMALLINT, anchor_year_group VARCHAR,
  dod DATE
admissions: subject_id INTEGER, hadm_id INTEGER, admittime TIMESTAMP, dischtime TIMESTAMP, deathtime TIMESTAMP,
  admission_type VARCHAR, admit_provider_id VARCHAR, admission_location VARCHAR, discharge_location VARCHAR,
  insurance VARCHAR, language VARCHAR, marital_status VARCHAR, race VARCHAR, edregtime TIMESTAMP, edouttime TIMESTAMP,
  hospital_expire_flag SMALLINT
transfers: subject_id INTEGER, hadm_id INTEGER, transfer_id INTEGER, eventtype VARCHAR, careunit VARCHAR,
  intime TIMESTAMP, outtime TIMESTAMP
services: subject_id INTEGER, hadm_id INTEGER, transfertime TIMESTAMP, prev_service VARCHAR, curr_service VARCHAR
icustays: subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, first_careunit VARCHAR, last_careunit VARCHAR,
  intime TIMESTAMP, outtime TIMESTAMP, los DOUBLE
d_labitems: itemid INTEGER, label VARCHAR, fluid VARCHAR, category VARCHAR
labevents: labevent_id INTEGER, subject_id INTEGER, hadm_id INTEGER, specimen_id INTEGER, itemid INTEGER,
  order_provider_id VARCHAR, charttime TIMESTAMP, storetime TIMESTAMP, value VARCHAR, valuenum DOUBLE,
  valueuom VARCHAR, ref_range_lower DOUBLE, ref_range_upper DOUBLE, flag VARCHAR, priority VARCHAR, comments VARCHAR
d_items: itemid INTEGER, label VARCHAR, abbreviation VARCHAR, linksto VARCHAR, category VARCHAR, unitname VARCHAR,
  param_type VARCHAR, lownormalvalue DOUBLE, highnormalvalue DOUBLE
chartevents: subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, caregiver_id INTEGER, charttime TIMESTAMP,
  storetime TIMESTAMP, itemid INTEGER, value VARCHAR, valuenum DOUBLE, valueuom VARCHAR, warning SMALLINT
inputevents: subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, caregiver_id INTEGER, starttime TIMESTAMP,
  endtime TIMESTAMP, storetime TIMESTAMP, itemid INTEGER, amount DOUBLE, amountuom VARCHAR, rate DOUBLE,
  rateuom VARCHAR, orderid INTEGER, linkorderid INTEGER, ordercategoryname VARCHAR, secondaryordercategoryname VARCHAR,
  ordercomponenttypedescription VARCHAR, ordercategorydescription VARCHAR, patientweight DOUBLE, totalamount DOUBLE,
  totalamountuom VARCHAR, isopenbag SMALLINT, continueinnextdept SMALLINT, statusdescription VARCHAR,
  originalamount DOUBLE, originalrate DOUBLE
outputevents: subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, caregiver_id INTEGER, charttime TIMESTAMP,
  storetime TIMESTAMP, itemid INTEGER, value DOUBLE, valueuom VARCHAR
prescriptions: subject_id INTEGER, hadm_id INTEGER, pharmacy_id INTEGER, poe_id VARCHAR, poe_seq INTEGER,
  order_provider_id VARCHAR, starttime TIMESTAMP, stoptime TIMESTAMP, drug_type VARCHAR, drug VARCHAR,
  formulary_drug_cd VARCHAR, gsn VARCHAR, ndc VARCHAR, prod_strength VARCHAR, form_rx VARCHAR, dose_val_rx VARCHAR,
  dose_unit_rx VARCHAR, form_val_disp VARCHAR, form_unit_disp VARCHAR, doses_per_24_hrs FLOAT, route VARCHAR
emar: subject_id INTEGER, hadm_id INTEGER, emar_id VARCHAR, emar_seq INTEGER, poe_id VARCHAR, pharmacy_id INTEGER,
  enter_provider_id VARCHAR, charttime TIMESTAMP, medication VARCHAR, event_txt VARCHAR, scheduletime TIMESTAMP,
  storetime TIMESTAMP
d_icd_diagnoses: icd_code VARCHAR, icd_version SMALLINT, long_title VARCHAR
diagnoses_icd: subject_id INTEGER, hadm_id INTEGER, seq_num INTEGER, icd_code VARCHAR, icd_version SMALLINT
d_icd_procedures: icd_code VARCHAR, icd_version SMALLINT, long_title VARCHAR
procedures_icd: subject_id INTEGER, hadm_id INTEGER, seq_num INTEGER, chartdate DATE, icd_code VARCHAR,
  icd_version SMALLINT
microbiologyevents: microevent_id INTEGER, subject_id INTEGER, hadm_id INTEGER, micro_specimen_id INTEGER,
  order_provider_id VARCHAR, chartdate TIMESTAMP, charttime TIMESTAMP, spec_itemid INTEGER, spec_type_desc VARCHAR,
  test_seq INTEGER, storedate TIMESTAMP, storetime TIMESTAMP, test_itemid INTEGER, test_name VARCHAR,
  org_itemid INTEGER, org_name VARCHAR, isolate_num SMALLINT, quantity VARCHAR, ab_itemid INTEGER, ab_name VARCHAR,
  dilution_text VARCHAR, dilution_comparison VARCHAR, dilution_value DOUBLE, interpretation VARCHAR, comments VARCHAR
procedureevents: subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, caregiver_id INTEGER, starttime TIMESTAMP,
  endtime TIMESTAMP, storetime TIMESTAMP, itemid INTEGER, value DOUBLE, valueuom VARCHAR, location VARCHAR,
  locationcategory VARCHAR, orderid INTEGER, linkorderid INTEGER, ordercategoryname VARCHAR,
  ordercategorydescription VARCHAR, patientweight DOUBLE, isopenbag SMALLINT, continueinnextdept SMALLINT,
  statusdescription VARCHAR, originalamount DOUBLE, originalrate DOUBLE
pharmacy: subject_id INTEGER, hadm_id INTEGER, pharmacy_id INTEGER, poe_id VARCHAR, starttime TIMESTAMP,
  stoptime TIMESTAMP, medication VARCHAR, proc_type VARCHAR, status VARCHAR, entertime TIMESTAMP,
  verifiedtime TIMESTAMP, route VARCHAR, frequency VARCHAR, disp_sched VARCHAR, infusion_type VARCHAR,
  sliding_scale VARCHAR, lockout_interval VARCHAR, basal_rate FLOAT, one_hr_max VARCHAR, doses_per_24_hrs FLOAT,
  duration FLOAT, duration_interval VARCHAR, expiration_value INTEGER, expiration_unit VARCHAR,
  expirationdate TIMESTAMP, dispensation VARCHAR, fill_quantity VARCHAR
drgcodes: subject_id INTEGER, hadm_id INTEGER, drg_type VARCHAR, drg_code VARCHAR, description VARCHAR,
  drg_severity SMALLINT, drg_mortality SMALLINT
omr: subject_id INTEGER, chartdate DATE, seq_num INTEGER, result_name VARCHAR, result_value VARCHAR
"""


def _official_types() -> dict[str, list[tuple[str, str]]]:
    tables: dict[str, list[tuple[str, str]]] = {}
    for block in OFFICIAL_TYPES.strip().split("\n"):
        if not block.startswith(" "):
            name, rest = block.split(":", 1)
            tables[name] = []
        else:
            rest = block
        for col in filter(None, (c.strip() for c in rest.split(","))):
            cname, ctype = col.split()
            tables[name].append((cname, ctype))
    return tables


OFFICIAL = _official_types()
EVENT_TABLES = ["transfers", "services", "icustays", "labevents", "chartevents", "inputevents", "outputevents",
                "procedureevents", "prescriptions", "pharmacy", "emar", "diagnoses_icd", "procedures_icd",
                "microbiologyevents", "drgcodes"]
ICU_TABLES = ["chartevents", "inputevents", "outputevents", "procedureevents"]


def _table_digests(path: Path) -> dict[str, str]:
    """md5 of every table's rows, sorted, so the digest ignores physical row order."""
    with duckdb.connect(str(path), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        return {
            name: con.execute(
                f"SELECT count(*) || ':' || coalesce(md5(string_agg(r, chr(10) ORDER BY r)), '') "
                f"FROM (SELECT CAST(t AS VARCHAR) AS r FROM {name} t)").fetchone()[0]
            for name in names if name != "_ehr_meta"
        }


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthetic") / "small.duckdb"
    synthetic.generate(out, patients=150, seed=7)
    return out


@pytest.fixture(scope="module")
def moderate(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    out = tmp_path_factory.mktemp("synthetic") / "moderate.duckdb"
    counts = synthetic.generate(out, patients=2_000, seed=3)
    assert counts["patients"] == 2_000
    con = duckdb.connect(str(out), read_only=True)
    yield con
    con.close()


def _zero(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    n = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
    assert n == 0, f"{n} offending rows for: {sql}\n" + repr(con.execute(sql + " LIMIT 5").fetchall())


# --- determinism --------------------------------------------------------------------------


def test_same_seed_gives_identical_tables(small: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.duckdb"
    synthetic.generate(again, patients=150, seed=7)
    first, second = _table_digests(small), _table_digests(again)
    assert set(first) == set(synthetic.TABLES)
    assert first == second


def test_different_seed_gives_different_data(small: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    synthetic.generate(other, patients=150, seed=8)
    first, second = _table_digests(small), _table_digests(other)
    facts = [t for t in synthetic.TABLES if not t.startswith("d_")]
    assert all(first[t] != second[t] for t in facts)
    assert all(first[t] == second[t] for t in synthetic.TABLES if t.startswith("d_"))  # vocabularies are fixed


def test_result_reports_row_counts(tmp_path: Path) -> None:
    counts = synthetic.generate(tmp_path / "c.duckdb", patients=20, seed=1)
    with duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True) as con:
        for table, n in counts.items():
            assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == n
    assert counts["patients"] == 20 and counts["admissions"] >= 20 and counts["labevents"] > 0


# --- shape: names, order, types, metadata ------------------------------------------------


def _demo_header(table: str) -> list[str]:
    need_shared(MIMIC_IV_DEMO, CHARTEVENTS_RECONSTRUCTED)
    for path in (MIMIC_IV_DEMO / "hosp" / f"{table}.csv.gz", MIMIC_IV_DEMO / "icu" / f"{table}.csv.gz",
                 CHARTEVENTS_RECONSTRUCTED / "icu" / f"{table}.csv.gz"):
        if path.exists():
            with gzip.open(path, "rt") as f:  # procedureevents spells two columns in capitals
                return f.readline().strip().lower().split(",")
    pytest.fail(f"the MIMIC-IV demo in ../shared/data has no table {table}")


@pytest.mark.parametrize("table", list(OFFICIAL))
def test_columns_match_mimic_iv(small: Path, table: str) -> None:
    with duckdb.connect(str(small), read_only=True) as con:
        got = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                          "WHERE table_name = ? ORDER BY ordinal_position", [table]).fetchall()
    assert [c for c, _ in got] == _demo_header(table)
    assert got == OFFICIAL[table]


def test_metadata_names_the_mimic_iv_schema(small: Path) -> None:
    with duckdb.connect(str(small), read_only=True) as con:
        meta = dict(con.execute("SELECT key, value FROM _ehr_meta").fetchall())
    assert meta["schema"] == "mimic_iv"
    assert meta["source"] == "synthetic"
    assert meta["now"] == "2180-01-01 00:00:00"
    assert meta["seed"] == "7" and meta["patients"] == "150"


# --- referential soundness and time logic ------------------------------------------------


@pytest.mark.parametrize("table", EVENT_TABLES)
def test_event_admissions_exist_with_same_subject(moderate: duckdb.DuckDBPyConnection, table: str) -> None:
    _zero(moderate, f"SELECT e.subject_id, e.hadm_id FROM {table} e LEFT JOIN admissions a "
                    f"ON a.hadm_id = e.hadm_id AND a.subject_id = e.subject_id WHERE a.hadm_id IS NULL")


@pytest.mark.parametrize("table", ICU_TABLES)
def test_icu_events_belong_to_their_stay(moderate: duckdb.DuckDBPyConnection, table: str) -> None:
    _zero(moderate, f"SELECT e.stay_id FROM {table} e LEFT JOIN icustays s "
                    f"ON s.stay_id = e.stay_id AND s.hadm_id = e.hadm_id WHERE s.stay_id IS NULL")
    time = "e.starttime" if table in ("inputevents", "procedureevents") else "e.charttime"
    _zero(moderate, f"SELECT * FROM {table} e JOIN icustays s USING (stay_id) "
                    f"WHERE {time} < s.intime OR {time} > s.outtime")
    if time == "e.starttime":
        _zero(moderate, f"SELECT * FROM {table} e JOIN icustays s USING (stay_id) "
                        f"WHERE e.endtime < e.starttime OR e.endtime > s.outtime")


def test_keys_are_unique_and_shaped_like_mimic(moderate: duckdb.DuckDBPyConnection) -> None:
    for table, key in [("patients", "subject_id"), ("admissions", "hadm_id"), ("icustays", "stay_id"),
                       ("transfers", "transfer_id"), ("labevents", "labevent_id"), ("prescriptions", "pharmacy_id"),
                       ("emar", "emar_id"), ("inputevents", "orderid"), ("microbiologyevents", "microevent_id")]:
        _zero(moderate, f"SELECT {key} FROM {table} GROUP BY {key} HAVING count(*) > 1")
    _zero(moderate, "SELECT subject_id FROM patients WHERE subject_id NOT BETWEEN 10000000 AND 19999999")
    _zero(moderate, "SELECT hadm_id FROM admissions WHERE hadm_id NOT BETWEEN 20000000 AND 29999999")
    _zero(moderate, "SELECT stay_id FROM icustays WHERE stay_id NOT BETWEEN 30000000 AND 39999999")
    _zero(moderate, "SELECT a.subject_id FROM admissions a ANTI JOIN patients p USING (subject_id)")


def test_admissions_lie_in_the_patients_life_and_do_not_overlap(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT * FROM admissions WHERE dischtime <= admittime")
    _zero(moderate, "SELECT * FROM (SELECT subject_id, admittime, lag(dischtime) OVER "
                    "(PARTITION BY subject_id ORDER BY admittime) AS prev FROM admissions) WHERE prev >= admittime")
    _zero(moderate, "SELECT * FROM admissions JOIN patients USING (subject_id) "
                    "WHERE year(admittime) < anchor_year OR year(admittime) - anchor_year + anchor_age > 120")
    _zero(moderate, "SELECT * FROM admissions JOIN patients USING (subject_id) WHERE CAST(dischtime AS DATE) > dod")


def test_deaths_are_consistent(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT * FROM admissions WHERE (hospital_expire_flag = 1) != (deathtime IS NOT NULL) "
                    "OR (hospital_expire_flag = 1) != coalesce(discharge_location = 'DIED', false)")
    _zero(moderate, "SELECT * FROM admissions JOIN patients USING (subject_id) "
                    "WHERE hospital_expire_flag = 1 AND (dod IS NULL OR dod != CAST(deathtime AS DATE))")
    _zero(moderate, "SELECT subject_id FROM admissions WHERE hospital_expire_flag = 1 GROUP BY ALL HAVING count(*) > 1")
    _zero(moderate, "SELECT * FROM admissions a JOIN admissions d USING (subject_id) "
                    "WHERE d.hospital_expire_flag = 1 AND a.admittime > d.admittime")
    dead, in_hospital, total = moderate.execute(
        "SELECT count(dod), (SELECT count(*) FROM admissions WHERE hospital_expire_flag = 1), count(*) "
        "FROM patients").fetchone()
    assert 0 < in_hospital < dead < total / 2


def test_stays_and_transfers_lie_inside_their_admission(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT * FROM icustays s JOIN admissions a USING (hadm_id) "
                    "WHERE s.intime < a.admittime OR s.outtime > a.dischtime OR s.outtime <= s.intime "
                    "OR abs(s.los - epoch(s.outtime - s.intime) / 86400) > 1e-6")
    # ED visits start before admittime (as in MIMIC-IV) and end inside the admission
    _zero(moderate, "SELECT * FROM transfers t JOIN admissions a USING (hadm_id) WHERE t.eventtype = 'ED' "
                    "AND (t.intime != a.edregtime OR t.outtime != a.edouttime OR t.outtime < a.admittime "
                    "OR t.outtime > a.dischtime)")
    _zero(moderate, "SELECT * FROM transfers t JOIN admissions a USING (hadm_id) WHERE t.eventtype != 'ED' "
                    "AND (t.intime < a.admittime OR t.intime > a.dischtime OR t.outtime > a.dischtime)")
    _zero(moderate, "SELECT * FROM transfers WHERE eventtype = 'discharge' "
                    "AND (careunit IS NOT NULL OR outtime IS NOT NULL)")
    _zero(moderate, "SELECT hadm_id FROM admissions ANTI JOIN (SELECT hadm_id FROM transfers "
                    "WHERE eventtype = 'discharge') USING (hadm_id)")
    _zero(moderate, "SELECT * FROM icustays s ANTI JOIN transfers t ON t.hadm_id = s.hadm_id "
                    "AND t.intime = s.intime AND t.careunit = s.first_careunit")


@pytest.mark.parametrize(("table", "column"), [
    ("labevents", "charttime"), ("prescriptions", "starttime"), ("prescriptions", "stoptime"), ("emar", "charttime"),
    ("microbiologyevents", "charttime"), ("services", "transfertime"), ("chartevents", "charttime"),
    ("inputevents", "endtime"), ("outputevents", "charttime"), ("procedureevents", "endtime"),
    ("pharmacy", "entertime"), ("pharmacy", "starttime"), ("pharmacy", "verifiedtime"),
])
def test_events_lie_inside_their_admission(moderate: duckdb.DuckDBPyConnection, table: str, column: str) -> None:
    _zero(moderate, f"SELECT * FROM {table} e JOIN admissions a USING (hadm_id) "
                    f"WHERE e.{column} < a.admittime OR e.{column} > a.dischtime")


def test_procedures_dated_inside_their_admission(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT * FROM procedures_icd p JOIN admissions a USING (hadm_id) "
                    "WHERE p.chartdate < CAST(a.admittime AS DATE) OR p.chartdate > CAST(a.dischtime AS DATE)")


def test_outpatient_records_belong_to_living_patients(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT subject_id FROM omr ANTI JOIN patients USING (subject_id)")
    _zero(moderate, "SELECT * FROM omr JOIN patients USING (subject_id) WHERE chartdate > dod")
    _zero(moderate, "SELECT subject_id, chartdate, result_name, seq_num FROM omr GROUP BY ALL HAVING count(*) > 1")
    _zero(moderate, "SELECT * FROM omr WHERE result_name = 'Blood Pressure' AND NOT regexp_matches(result_value, "
                    "'^[0-9]+/[0-9]+$')")


def test_ventilation_matches_the_chart(moderate: duckdb.DuckDBPyConnection) -> None:
    """Ventilator settings are charted only while an invasive ventilation procedure runs."""
    _zero(moderate, "SELECT c.* FROM chartevents c WHERE c.itemid IN (223835, 220339, 224685) AND NOT EXISTS ("
                    "SELECT 1 FROM procedureevents p WHERE p.stay_id = c.stay_id AND p.itemid = 225792 "
                    "AND c.charttime BETWEEN p.starttime AND p.endtime)")
    _zero(moderate, "SELECT * FROM prescriptions r ANTI JOIN pharmacy p USING (pharmacy_id, hadm_id, starttime)")
    _zero(moderate, "SELECT hadm_id FROM admissions ANTI JOIN (SELECT hadm_id FROM drgcodes WHERE drg_type = 'HCFA') "
                    "USING (hadm_id)")


def test_nothing_happens_after_now(moderate: duckdb.DuckDBPyConnection) -> None:
    columns = moderate.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE data_type IN ('TIMESTAMP', 'DATE') AND table_name != '_ehr_meta'").fetchall()
    assert len(columns) >= 25
    for table, column in columns:
        _zero(moderate, f"SELECT {column} FROM {table} WHERE {column} >= TIMESTAMP '{NOW}'")


# --- vocabularies ---------------------------------------------------------------------------


def test_items_exist_in_the_dictionaries(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT itemid FROM labevents ANTI JOIN d_labitems USING (itemid)")
    for table in ICU_TABLES:
        _zero(moderate, f"SELECT itemid FROM {table} ANTI JOIN (SELECT itemid FROM d_items "
                        f"WHERE linksto = '{table}') USING (itemid)")


def test_icd_codes_exist_with_their_version(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT * FROM diagnoses_icd ANTI JOIN d_icd_diagnoses USING (icd_code, icd_version)")
    _zero(moderate, "SELECT * FROM procedures_icd ANTI JOIN d_icd_procedures USING (icd_code, icd_version)")
    _zero(moderate, "SELECT hadm_id FROM diagnoses_icd GROUP BY hadm_id HAVING count(DISTINCT icd_version) > 1 "
                    "OR min(seq_num) != 1 OR max(seq_num) != count(*)")
    versions = {v for (v,) in moderate.execute("SELECT DISTINCT icd_version FROM diagnoses_icd").fetchall()}
    assert versions == {9, 10}


def test_well_known_itemids_carry_their_mimic_meaning(moderate: duckdb.DuckDBPyConnection) -> None:
    labs = dict(moderate.execute("SELECT itemid, label FROM d_labitems").fetchall())
    assert labs[50912] == "Creatinine" and labs[50971] == "Potassium" and labs[51222] == "Hemoglobin"
    assert labs[51301] == "White Blood Cells" and labs[50813] == "Lactate"
    items = dict(moderate.execute("SELECT itemid, label FROM d_items").fetchall())
    assert items[220045] == "Heart Rate" and items[220277] == "O2 saturation pulseoxymetry"
    assert items[223761] == "Temperature Fahrenheit" and items[226559] == "Foley"
    n = dict(moderate.execute("SELECT itemid, count(*) FROM chartevents GROUP BY ALL").fetchall())
    assert all(n.get(i, 0) > 0 for i in (220045, 220179, 220050, 220210, 220277, 223761, 220739, 226512))


def test_units_and_values_agree(moderate: duckdb.DuckDBPyConnection) -> None:
    _zero(moderate, "SELECT itemid FROM labevents GROUP BY itemid HAVING count(DISTINCT valueuom) > 1")
    _zero(moderate, "SELECT * FROM chartevents c JOIN d_items d USING (itemid) "
                    "WHERE c.valueuom IS DISTINCT FROM d.unitname")
    _zero(moderate, "SELECT * FROM labevents WHERE valuenum IS NOT NULL AND TRY_CAST(value AS DOUBLE) != valuenum")
    _zero(moderate, "SELECT * FROM labevents WHERE value IS NULL")
    _zero(moderate, "SELECT * FROM labevents WHERE valuenum IS NOT NULL AND "
                    "(flag = 'abnormal') != (valuenum < ref_range_lower OR valuenum > ref_range_upper)")
    _zero(moderate, "SELECT * FROM chartevents WHERE value IS NULL")


def test_values_are_plausible_and_follow_diagnoses(moderate: duckdb.DuckDBPyConnection) -> None:
    stats = dict(moderate.execute(
        "SELECT itemid, median(valuenum) FROM labevents WHERE itemid IN (50983, 50971, 51222, 50912) GROUP BY ALL"
    ).fetchall())
    assert 134 <= stats[50983] <= 142 and 3.6 <= stats[50971] <= 4.6
    assert 8 <= stats[51222] <= 13 and 0.7 <= stats[50912] <= 2.0
    hr = moderate.execute("SELECT median(valuenum) FROM chartevents WHERE itemid = 220045").fetchone()[0]
    assert 70 <= hr <= 105
    abnormal = moderate.execute("SELECT avg(coalesce(flag = 'abnormal', false)::INT) FROM labevents "
                                "WHERE valuenum IS NOT NULL").fetchone()[0]
    assert 0.15 < abnormal < 0.7
    with_aki, without = moderate.execute(
        "WITH aki AS (SELECT DISTINCT hadm_id FROM diagnoses_icd WHERE icd_code IN ('5849', 'N179')) "
        "SELECT median(valuenum) FILTER (WHERE hadm_id IN (SELECT hadm_id FROM aki)), "
        "median(valuenum) FILTER (WHERE hadm_id NOT IN (SELECT hadm_id FROM aki)) "
        "FROM labevents WHERE itemid = 50912").fetchone()
    assert with_aki > 1.3 * without


def test_longitudinal_structure(moderate: duckdb.DuckDBPyConnection) -> None:
    multi, icu_share, micro_positive = moderate.execute(
        "SELECT (SELECT avg((n > 1)::INT) FROM (SELECT count(*) n FROM admissions GROUP BY subject_id)), "
        "(SELECT count(*) FROM icustays) / (SELECT count(*) FROM admissions), "
        "(SELECT count(DISTINCT micro_specimen_id) FROM microbiologyevents WHERE org_name IS NOT NULL)").fetchone()
    assert 0.2 < multi < 0.7 and 0.08 < icu_share < 0.35 and micro_positive > 0


# --- failure and arguments -------------------------------------------------------------------


def test_a_failing_build_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic, "CHUNK_PATIENTS", 40)
    out = tmp_path / "broken.duckdb"
    seen = []

    def progress(phase: str, done: int, total: int) -> None:
        seen.append((phase, done, total))
        if phase == "patients" and done > 0:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        synthetic.generate(out, patients=100, seed=0, progress=progress)
    assert ("dictionaries", 1, 1) in seen and ("patients", 40, 100) in seen
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rebuild_keeps_the_previous_file(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "keep.duckdb"
    out.write_bytes(small.read_bytes())
    before = _table_digests(out)

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "patients" and done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synthetic.generate(out, patients=30, seed=1, progress=progress)
    assert _table_digests(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.duckdb"]


def test_progress_reaches_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic, "CHUNK_PATIENTS", 40)
    seen = []
    synthetic.generate(tmp_path / "p.duckdb", patients=100, seed=0, progress=lambda *a: seen.append(a))
    assert seen[0] == ("dictionaries", 1, 1)
    assert [d for p, d, _ in seen if p == "patients"] == [0, 40, 80, 100]
    assert seen[-1] == ("patients", 100, 100)


def test_chunks_are_reproducible_prefixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk k's patients depend only on the seed and k, so a bigger build extends a smaller one."""
    monkeypatch.setattr(synthetic, "CHUNK_PATIENTS", 30)
    synthetic.generate(tmp_path / "a.duckdb", patients=30, seed=4)
    synthetic.generate(tmp_path / "b.duckdb", patients=75, seed=4)
    query = "SELECT * FROM patients ORDER BY subject_id"
    with duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True) as a, \
            duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True) as b:
        first = a.execute(query).fetchall()
        subjects = [r[0] for r in first]
        assert b.execute(f"SELECT * FROM patients WHERE subject_id IN ({', '.join(map(str, subjects))}) "
                         "ORDER BY subject_id").fetchall() == first
        assert b.execute("SELECT count(*) FROM patients").fetchone()[0] == 75


@pytest.mark.parametrize("kwargs", [{"patients": 0}, {"patients": synthetic.MAX_PATIENTS + 1}, {"patients": 2.5},
                                    {"seed": -1}, {"now": dt.datetime(2180, 1, 1, tzinfo=dt.timezone.utc)},
                                    {"now": dt.datetime(1800, 1, 1)}])
def test_bad_arguments_are_user_errors(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(DataSourceError):
        synthetic.generate(tmp_path / "x.duckdb", **kwargs)
    assert not (tmp_path / "x.duckdb").exists()


def test_now_moves_the_whole_timeline(tmp_path: Path) -> None:
    now = dt.datetime(2030, 6, 1)
    synthetic.generate(tmp_path / "n.duckdb", patients=50, seed=2, now=now)
    with duckdb.connect(str(tmp_path / "n.duckdb"), read_only=True) as con:
        first, last = con.execute("SELECT min(admittime), max(dischtime) FROM admissions").fetchone()
        meta = dict(con.execute("SELECT key, value FROM _ehr_meta").fetchall())
    assert dt.datetime(2017, 1, 1) < first and last < now
    assert meta["now"] == "2030-06-01 00:00:00"
