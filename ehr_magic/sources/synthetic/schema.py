"""Table layouts written by the synthetic generator: MIMIC-IV 2.2 names, column order
and types (hosp and icu modules, flat in the main schema).

Types follow the official MIMIC-IV PostgreSQL definitions translated to DuckDB:
INTEGER ids, SMALLINT flags/versions/ages, TIMESTAMP times, DATE dates, DOUBLE for
PostgreSQL's FLOAT/DOUBLE PRECISION, REAL for REAL, VARCHAR for text.
"""

from __future__ import annotations

I, S, T, D, F, R, V = "INTEGER", "SMALLINT", "TIMESTAMP", "DATE", "DOUBLE", "REAL", "VARCHAR"  # noqa: E741 - short codes

TABLES: dict[str, list[tuple[str, str]]] = {
    "patients": [("subject_id", I), ("gender", V), ("anchor_age", S), ("anchor_year", S),
                 ("anchor_year_group", V), ("dod", D)],
    "admissions": [("subject_id", I), ("hadm_id", I), ("admittime", T), ("dischtime", T), ("deathtime", T),
                   ("admission_type", V), ("admit_provider_id", V), ("admission_location", V),
                   ("discharge_location", V), ("insurance", V), ("language", V), ("marital_status", V),
                   ("race", V), ("edregtime", T), ("edouttime", T), ("hospital_expire_flag", S)],
    "transfers": [("subject_id", I), ("hadm_id", I), ("transfer_id", I), ("eventtype", V), ("careunit", V),
                  ("intime", T), ("outtime", T)],
    "services": [("subject_id", I), ("hadm_id", I), ("transfertime", T), ("prev_service", V), ("curr_service", V)],
    "icustays": [("subject_id", I), ("hadm_id", I), ("stay_id", I), ("first_careunit", V), ("last_careunit", V),
                 ("intime", T), ("outtime", T), ("los", F)],
    "d_labitems": [("itemid", I), ("label", V), ("fluid", V), ("category", V)],
    "labevents": [("labevent_id", I), ("subject_id", I), ("hadm_id", I), ("specimen_id", I), ("itemid", I),
                  ("order_provider_id", V), ("charttime", T), ("storetime", T), ("value", V), ("valuenum", F),
                  ("valueuom", V), ("ref_range_lower", F), ("ref_range_upper", F), ("flag", V), ("priority", V),
                  ("comments", V)],
    "d_items": [("itemid", I), ("label", V), ("abbreviation", V), ("linksto", V), ("category", V), ("unitname", V),
                ("param_type", V), ("lownormalvalue", F), ("highnormalvalue", F)],
    "chartevents": [("subject_id", I), ("hadm_id", I), ("stay_id", I), ("caregiver_id", I), ("charttime", T),
                    ("storetime", T), ("itemid", I), ("value", V), ("valuenum", F), ("valueuom", V), ("warning", S)],
    "inputevents": [("subject_id", I), ("hadm_id", I), ("stay_id", I), ("caregiver_id", I), ("starttime", T),
                    ("endtime", T), ("storetime", T), ("itemid", I), ("amount", F), ("amountuom", V), ("rate", F),
                    ("rateuom", V), ("orderid", I), ("linkorderid", I), ("ordercategoryname", V),
                    ("secondaryordercategoryname", V), ("ordercomponenttypedescription", V),
                    ("ordercategorydescription", V), ("patientweight", F), ("totalamount", F), ("totalamountuom", V),
                    ("isopenbag", S), ("continueinnextdept", S), ("statusdescription", V), ("originalamount", F),
                    ("originalrate", F)],
    "outputevents": [("subject_id", I), ("hadm_id", I), ("stay_id", I), ("caregiver_id", I), ("charttime", T),
                     ("storetime", T), ("itemid", I), ("value", F), ("valueuom", V)],
    "prescriptions": [("subject_id", I), ("hadm_id", I), ("pharmacy_id", I), ("poe_id", V), ("poe_seq", I),
                      ("order_provider_id", V), ("starttime", T), ("stoptime", T), ("drug_type", V), ("drug", V),
                      ("formulary_drug_cd", V), ("gsn", V), ("ndc", V), ("prod_strength", V), ("form_rx", V),
                      ("dose_val_rx", V), ("dose_unit_rx", V), ("form_val_disp", V), ("form_unit_disp", V),
                      ("doses_per_24_hrs", R), ("route", V)],
    "emar": [("subject_id", I), ("hadm_id", I), ("emar_id", V), ("emar_seq", I), ("poe_id", V), ("pharmacy_id", I),
             ("enter_provider_id", V), ("charttime", T), ("medication", V), ("event_txt", V), ("scheduletime", T),
             ("storetime", T)],
    "d_icd_diagnoses": [("icd_code", V), ("icd_version", S), ("long_title", V)],
    "diagnoses_icd": [("subject_id", I), ("hadm_id", I), ("seq_num", I), ("icd_code", V), ("icd_version", S)],
    "d_icd_procedures": [("icd_code", V), ("icd_version", S), ("long_title", V)],
    "procedures_icd": [("subject_id", I), ("hadm_id", I), ("seq_num", I), ("chartdate", D), ("icd_code", V),
                       ("icd_version", S)],
    "microbiologyevents": [("microevent_id", I), ("subject_id", I), ("hadm_id", I), ("micro_specimen_id", I),
                           ("order_provider_id", V), ("chartdate", T), ("charttime", T), ("spec_itemid", I),
                           ("spec_type_desc", V), ("test_seq", I), ("storedate", T), ("storetime", T),
                           ("test_itemid", I), ("test_name", V), ("org_itemid", I), ("org_name", V),
                           ("isolate_num", S), ("quantity", V), ("ab_itemid", I), ("ab_name", V),
                           ("dilution_text", V), ("dilution_comparison", V), ("dilution_value", F),
                           ("interpretation", V), ("comments", V)],
    "procedureevents": [("subject_id", I), ("hadm_id", I), ("stay_id", I), ("caregiver_id", I), ("starttime", T),
                        ("endtime", T), ("storetime", T), ("itemid", I), ("value", F), ("valueuom", V), ("location", V),
                        ("locationcategory", V), ("orderid", I), ("linkorderid", I), ("ordercategoryname", V),
                        ("ordercategorydescription", V), ("patientweight", F), ("isopenbag", S),
                        ("continueinnextdept", S), ("statusdescription", V), ("originalamount", F),
                        ("originalrate", F)],
    "pharmacy": [("subject_id", I), ("hadm_id", I), ("pharmacy_id", I), ("poe_id", V), ("starttime", T),
                 ("stoptime", T), ("medication", V), ("proc_type", V), ("status", V), ("entertime", T),
                 ("verifiedtime", T), ("route", V), ("frequency", V), ("disp_sched", V), ("infusion_type", V),
                 ("sliding_scale", V), ("lockout_interval", V), ("basal_rate", R), ("one_hr_max", V),
                 ("doses_per_24_hrs", R), ("duration", R), ("duration_interval", V), ("expiration_value", I),
                 ("expiration_unit", V), ("expirationdate", T), ("dispensation", V), ("fill_quantity", V)],
    "drgcodes": [("subject_id", I), ("hadm_id", I), ("drg_type", V), ("drg_code", V), ("description", V),
                 ("drg_severity", S), ("drg_mortality", S)],
    "omr": [("subject_id", I), ("chartdate", D), ("seq_num", I), ("result_name", V), ("result_value", V)],
}


def create_statements() -> list[str]:
    """CREATE TABLE statements for every table, in dependency-friendly order."""
    return [
        f"CREATE TABLE {name} ({', '.join(f'{col} {typ}' for col, typ in cols)})"
        for name, cols in TABLES.items()
    ]
