"""The one "did you mean" (``ehr_magic.text.closest``, rapidfuzz) and the messages that use it."""

from __future__ import annotations

import pytest

from ehr_magic.errors import ConfigError, EhrMagicError
from ehr_magic.knowledge import model as knowledge
from ehr_magic.skills import SkillError, registry
from ehr_magic.text import closest

TABLES = ["patients", "admissions", "labevents", "d_labitems", "prescriptions"]


@pytest.mark.parametrize(("word", "expected"), [
    ("patient", "patients"),
    ("labevent", "labevents"),
    ("prescription", "prescriptions"),
    ("xyz", None),
    ("", None),
])
def test_closest_name_or_none(word: str, expected: str | None) -> None:
    assert closest(word, TABLES) == expected


def test_closest_takes_any_iterable_and_a_cutoff() -> None:
    assert closest("labevnts", (t for t in TABLES)) == "labevents"
    assert closest("labevnts", {t: 1 for t in TABLES}) == "labevents"  # a mapping's keys
    assert closest("labevnts", TABLES, cutoff=99) is None
    assert closest("patients", []) is None


def test_the_messages_that_suggest_a_name(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from ehr_magic.llm import resolve_settings, save_setting

    config = tmp_path / "config.toml"
    config.write_text('[llm]\nmodle = "gpt-4o"\n')
    monkeypatch.setenv("EHR_MAGIC_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^Unknown setting 'modle' under \[llm\] in .*: did you mean 'model'\?$"):
        resolve_settings()
    with pytest.raises(ConfigError,
                       match=r"Unknown setting 'colour' for save_setting\(\): valid keys are provider, model,"):
        save_setting("colour", "blue", config_file=config)
    with pytest.raises(EhrMagicError, match=r"No table 'admision' is described for schema mimic_iv\. "
                                            r"Did you mean 'admissions'\? Described tables: patients,"):
        knowledge.load("mimic_iv").table("admision")
    with pytest.raises(SkillError, match=r"No skill named 'sofa_scor'\. Did you mean 'sofa_score'\?"):
        raise registry.unknown("sofa_scor", ["sofa_score", "egfr"])
