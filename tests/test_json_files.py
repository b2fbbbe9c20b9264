"""JSON files in a data folder: a FHIR R4 bulk export (JSON Lines, one resource type per file, a type
split over two files), a FHIR bundle as Synthea writes one per patient, and a plain JSON array,
loaded flat and drafted like any other file."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb

import ehr_magic
from ehr_magic import sources
from test_csv_folder import one_error_line, run

LOINC = "http://loinc.org"
TESTS = [("718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL"), ("8867-4", "Heart rate", "/min"),
         ("2951-2", "Sodium [Moles/volume] in Serum or Plasma", "mmol/L")]
PATIENTS, ENCOUNTERS, OBSERVATIONS = 30, 60, 200


def _lines(path: Path, resources: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in resources), encoding="utf-8")


def _patient(i: int) -> dict:
    return {"resourceType": "Patient", "id": f"pat-{i}",
            "meta": {"lastUpdated": "2024-05-01T10:00:00Z", "profile": ["http://example.org/us-core-patient"]},
            "text": {"status": "generated", "div": f"<div xmlns='http://www.w3.org/1999/xhtml'>Patient {i}</div>"},
            "extension": [{"url": "http://example.org/race", "valueCoding": {"code": "2106-3"}}],
            "identifier": [{"system": "http://hospital.example/mrn", "value": f"MRN{i:05d}"},
                           {"system": "http://hospital.example/insurance", "value": f"INS{i:04d}",
                            "extension": [{"url": "http://example.org/verified", "valueBoolean": True}]}],
            "name": [{"family": f"Family{i}", "given": ["Alex", "Q"] if i % 2 else ["Sam"]}],
            "gender": "female" if i % 2 else "male", "birthDate": f"{1940 + i % 60}-0{1 + i % 9}-15"}


def _fhir_export(folder: Path) -> None:
    folder.mkdir()
    _lines(folder / "Patient.ndjson", [_patient(i) for i in range(1, PATIENTS + 1)])
    _lines(folder / "Encounter.ndjson", [
        {"resourceType": "Encounter", "id": f"enc-{j}", "status": "finished",
         "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "IMP" if j % 3 else "AMB",
                   "display": "inpatient encounter" if j % 3 else "ambulatory"},
         "subject": {"reference": f"Patient/pat-{1 + j % PATIENTS}"},
         "period": {"start": f"2023-{1 + j % 12:02d}-0{1 + j % 8}T09:00:00+01:00",
                    "end": f"2023-{1 + j % 12:02d}-0{2 + j % 8}T11:30:00+01:00"}}
        for j in range(1, ENCOUNTERS + 1)])
    observations = []
    for k in range(1, OBSERVATIONS + 1):
        code, display, unit = TESTS[k % 3]
        coding = [{"system": LOINC, "code": code, "display": display}]
        if code == "2951-2":  # the lab system's own code first, as an EHR's export writes it
            coding.insert(0, {"system": "urn:oid:1.2.840.114350.1.13.0.1.7.5.737384.1", "code": "1510",
                              "display": "SODIUM"})
        observation = {
            "resourceType": "Observation", "id": f"obs-{k}", "status": "final",
            "code": {"coding": coding, "text": display.split(" [")[0]},
            "subject": {"reference": f"Patient/pat-{1 + k % PATIENTS}"},
            "encounter": {"reference": f"Encounter/enc-{1 + k % ENCOUNTERS}"},
            "effectiveDateTime": f"2023-06-{1 + k % 28:02d}T08:{k % 60:02d}:00+01:00",
            "valueQuantity": {"value": 9.5 + k % 7, "unit": unit, "system": "http://unitsofmeasure.org"}}
        if k == OBSERVATIONS:  # a field only the last resource has: types are read from every object
            observation["interpretation"] = [{"coding": [{"code": "L", "display": "Low"}]}]
        observations.append(observation)
    for k in range(OBSERVATIONS + 1, OBSERVATIONS + 11):  # blood pressures: two readings in one resource
        observations.append({
            "resourceType": "Observation", "id": f"obs-{k}", "status": "final",
            "code": {"coding": [{"system": LOINC, "code": "85354-9", "display": "Blood pressure panel"}]},
            "subject": {"reference": f"Patient/pat-{1 + k % PATIENTS}"},
            "effectiveDateTime": f"2023-07-{1 + k % 28:02d}T10:00:00Z",
            "component": [{"code": {"coding": [{"system": LOINC, "code": code, "display": display}]},
                           "valueQuantity": {"value": value + k % 5, "unit": "mm[Hg]"}}
                          for code, display, value in (("8480-6", "Systolic blood pressure", 120),
                                                       ("8462-4", "Diastolic blood pressure", 80))]})
    _lines(folder / "Observation_1.ndjson", observations[:120])
    _lines(folder / "Observation_2.ndjson", observations[120:OBSERVATIONS])
    _lines(folder / "Observation_3.ndjson", observations[OBSERVATIONS:])
    for number in range(90, 100):  # Synthea's output: one bundle per patient, references by urn:uuid
        uuid = f"5b1f-{number}"
        bundle = {"resourceType": "Bundle", "type": "transaction", "entry": [
            {"fullUrl": f"urn:uuid:{uuid}", "resource": {**_patient(number), "id": uuid}},
            *({"fullUrl": f"urn:uuid:c-{number}-{n}", "resource": {
                "resourceType": "Condition", "id": f"c-{number}-{n}", "subject": {"reference": f"urn:uuid:{uuid}"},
                "code": {"coding": [{"system": "http://snomed.info/sct", "code": "44054006",
                                     "display": "Diabetes mellitus type 2"}]},
                "onsetDateTime": f"2019-0{n}-10T00:00:00Z"}} for n in range(1, 1 + number % 3))]}
        (folder / f"synthea_patient_{number}.json").write_text(json.dumps(bundle), encoding="utf-8")
    (folder / "wards.json").write_text(json.dumps([{"ward": "7A", "beds": 20, "roles": ["RN", "HCA"]},
                                                   {"ward": "ICU", "beds": 12, "roles": ["RN"]}]), encoding="utf-8")


def test_a_fhir_export_loads_as_flat_tables_that_join(tmp_path: Path) -> None:
    folder = tmp_path / "fhir_export"
    _fhir_export(folder)
    out = tmp_path / "fhir.duckdb"
    report = sources.load("csv", [folder], out)
    conditions = sum(number % 3 for number in range(90, 100))
    sodium = sum(k % 3 == 2 for k in range(1, OBSERVATIONS + 1))
    assert report.tables == {"condition": conditions, "encounter": ENCOUNTERS, "observation": OBSERVATIONS + 10,
                             "observation_code_coding": OBSERVATIONS + 10 + sodium,
                             "observation_component": 20, "patient": PATIENTS + 10,
                             "patient_identifier": 2 * (PATIENTS + 10), "wards": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fhir.duckdb", "fhir_export"]  # no copies left
    with duckdb.connect(str(out), read_only=True) as con:
        columns = {table: dict(con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                           "table_name = ?", [table]).fetchall()) for table in report.tables}
        patient, observation = columns["patient"], columns["observation"]
        assert not any(c.startswith(("meta", "text", "extension", "resourcetype")) for c in patient), patient
        assert {"id", "gender", "birthdate", "name_family", "name_given"} <= set(patient)
        assert {"code_text", "subject_id", "encounter_id", "valuequantity_value", "valuequantity_unit",
                "interpretation_coding_display"} <= set(observation)
        assert set(columns["observation_code_coding"]) == {
            "observation_id", "list_index", "code_coding_system", "code_coding_code", "code_coding_display"}
        assert con.execute("SELECT list_index, code_coding_code FROM observation_code_coding "
                           "WHERE observation_id = 'obs-2' ORDER BY 1").fetchall() == [(1, "1510"), (2, "2951-2")]
        assert observation["effectivedatetime"] == "TIMESTAMP" and observation["valuequantity_value"] == "DOUBLE"
        assert con.execute("SELECT subject_id, encounter_id, effectivedatetime FROM observation WHERE id = 'obs-1'"
                           ).fetchall() == [("pat-2", "enc-2", dt.datetime(2023, 6, 2, 7, 1))]  # in UTC
        assert con.execute("SELECT name_given FROM patient WHERE id = 'pat-1'").fetchall() == [("Alex; Q",)]
        assert con.execute("SELECT subject_id FROM condition WHERE id = 'c-91-1'").fetchall() == [("5b1f-91",)]
        assert con.execute("SELECT roles FROM wards WHERE ward = '7A'").fetchall() == [("RN; HCA",)]
        # every reading of a list, with its resource's id and its place; not one of them in the resource's row
        assert con.execute("SELECT list_index, component_code_coding_display, component_valuequantity_value "
                           "FROM observation_component WHERE observation_id = 'obs-201' ORDER BY 1").fetchall() == [
            (1, "Systolic blood pressure", 121), (2, "Diastolic blood pressure", 81)]
        assert not any(c.startswith(("component", "identifier", "code_coding")) for c in [*observation, *patient])
        assert not any("extension" in c for c in columns["patient_identifier"]), columns["patient_identifier"]
    with ehr_magic.connect(out) as ehr:
        tables = ehr.knowledge.tables
        assert "patient ON observation.subject_id = patient.id" in tables["observation"].joins
        assert "encounter ON observation.encounter_id = encounter.id" in tables["observation"].joins
        assert "patient ON condition.subject_id = patient.id" in tables["condition"].joins
        assert any("keeps its first entry only" in rule for rule in ehr.knowledge.conventions)
        assert ("The component list of table observation holds several entries in some rows: each is a row of "
                "table observation_component, with observation_id and its place in the list (list_index, "
                "from 1)." in ehr.knowledge.conventions), ehr.knowledge.conventions
        for child in ("observation_component", "patient_identifier"):  # a resource's parts, not dictionaries
            assert "dictionary" not in tables[child].description and child not in tables["patient"].joins
        assert "observation ON observation_component.observation_id = observation.id" in \
            tables["observation_component"].joins
        assert "patient ON patient_identifier.patient_id = patient.id" in tables["patient_identifier"].joins
        # one value in 200 rows: not "100% empty"
        assert tables["observation"].columns["interpretation_coding_display"].endswith("; >99% empty.")
        assert ehr.lookup("observation_code_coding", "code_coding_display", "hemoglobin")[0] == TESTS[0][1]
        low = ehr.sql("SELECT count(DISTINCT o.subject_id) FROM observation o JOIN patient p ON p.id = o.subject_id "
                      "JOIN observation_code_coding c ON c.observation_id = o.id WHERE c.code_coding_code = '718-7' "
                      "AND o.valuequantity_value < 12 AND p.gender = 'female'")
        assert low.item() > 0
        assert ehr.now == dt.datetime(2023, 12, 8, 8, 0)  # the latest encounter start, in UTC (not its end)


def test_a_json_file_that_cannot_be_read_is_one_sentence(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Observation.ndjson").write_text('{"resourceType": "Observation", "id": "1"}\n{"id": \n')
    out = tmp_path / "b.duckdb"
    line = one_error_line(run("data", "load", "csv", str(broken), "--out", str(out), "--quiet"))
    assert line.startswith(f"error: Cannot read {broken / 'Observation.ndjson'} as JSON (") and line.endswith(
        "a JSON file should hold one object per line, or an array of objects."), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]


def test_bundles_one_a_line_or_in_an_array_load_as_one_bundle_does(tmp_path: Path) -> None:
    def bundle(number: int) -> dict:
        return {"resourceType": "Bundle", "type": "collection", "entry": [
            {"resource": {**_patient(number), "id": f"p{number}"}},
            {"resource": {"resourceType": "Condition", "id": f"c{number}",
                          "subject": {"reference": f"Patient/p{number}"},
                          "onsetDateTime": f"2020-01-0{1 + number % 9}T00:00:00Z"}},
            {"request": {"method": "DELETE"}}]}  # an entry without a resource

    lines, array = tmp_path / "lines", tmp_path / "array"
    lines.mkdir()
    array.mkdir()
    (lines / "bundles.ndjson").write_text("".join(json.dumps(bundle(n)) + "\n" for n in range(1, 6)))
    (array / "bundles.json").write_text(json.dumps([bundle(n) for n in range(1, 6)] + [{"resourceType": "Bundle"}]))
    for folder in (lines, array):
        report = sources.load("csv", [folder], tmp_path / f"{folder.name}.duckdb")
        assert report.tables == {"condition": 5, "patient": 5, "patient_identifier": 10}, folder
