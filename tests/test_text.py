"""The one text layer: words, stems, stop words and the normal forms every package compares."""

from __future__ import annotations

from ehr_magic.text import (
    FUNCTION_WORDS,
    masked_tokens,
    normalise,
    normalise_all,
    normalise_unicode,
    prefix_stem,
    split_words,
    stem,
)


def test_words_are_lower_case_letters_and_digits_split_at_everything_else() -> None:
    assert split_words("LabTest_key, Heart-Rate 2x!") == ["labtest", "key", "heart", "rate", "2x"]
    assert split_words("  ...  ") == []
    # the words are those normalise leaves
    text = "Potassium; Whole Blood (mEq/L)"
    assert split_words(text) == normalise(text).split()


def test_a_column_is_normalised_as_each_value_is() -> None:
    values = ["Potassium, Whole Blood", "  RDW-SD ", "İstanbul", "Straße", "a\tb\nc", "", "ＡＢＣ 1"]
    assert normalise_all(values).to_list() == [normalise(v) for v in values]


def test_stems_join_the_forms_of_one_word() -> None:
    assert stem("diagnosed") == stem("diagnoses") == stem("diagnosis")
    assert stem("pricing") == stem("price")
    assert stem("prescribed") == stem("prescription") == stem("prescriptions")
    assert stem("admission") != stem("discharge")


def test_prefix_stems_are_the_start_of_the_word() -> None:
    assert prefix_stem("diagnosed") == prefix_stem("diagnoses") == "diagn"
    assert prefix_stem("prescribed") == prefix_stem("prescriptions")
    assert prefix_stem("study") in "studykey" and stem("study") not in "studykey"
    assert prefix_stem("age") == "age"


def test_stems_leave_placeholders_alone() -> None:
    assert stem("<num>") == "<num>"


def test_function_words_are_english_grammar_not_content() -> None:
    assert {"the", "of", "was", "which", "because", "yours"} <= FUNCTION_WORDS
    assert not {"patient", "drug", "first", "count", "heart"} & FUNCTION_WORDS
    content = [w for w in split_words("What was the first heart rate of the patient?") if w not in FUNCTION_WORDS]
    assert content == ["first", "heart", "rate", "patient"]


def test_masked_tokens_replace_values_by_their_kind() -> None:
    tokens = masked_tokens("Was 'aspirin' given on 2100-01-02 at 10:30, five times or 3.5 mg?")
    assert tokens == ["was", "val", "given", "on", "date", "at", "time", "num", "times", "or", "num", "mg"]


def test_memory_form_keeps_letters_of_every_script_and_underscores() -> None:
    assert normalise_unicode("  Ménière's  disease_x? ") == "ménière s disease_x"
    assert normalise("Ménière's disease_x") == "m ni re s disease x"
