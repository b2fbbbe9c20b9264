"""The prompt templates: each file listed in ``prompts.NAMES``, each renders strictly."""

from __future__ import annotations

from importlib import resources

import pytest

from ehr_magic.agent import context, prompts
from ehr_magic.runtime.executor import ErrorInfo


def test_every_template_file_is_listed_and_every_name_has_a_file() -> None:
    folder = resources.files("ehr_magic.agent").joinpath("prompts")
    files = {entry.name.removesuffix(".txt") for entry in folder.iterdir() if entry.name.endswith(".txt")}
    assert len(set(prompts.NAMES)) == len(prompts.NAMES)
    assert files == set(prompts.NAMES)


@pytest.mark.parametrize("name", prompts.NAMES)
def test_every_template_renders_with_its_placeholders(name: str) -> None:
    assert prompts.template(name).is_valid()
    prompts.render(name, **dict.fromkeys(prompts.placeholders(name), "x"))


def test_a_phrase_leaves_out_only_the_newline_that_ends_its_file() -> None:
    assert prompts.phrase("tables", tables="t(a)\n") == "Tables for this question:\nt(a)\n"
    assert prompts.phrase("looks_left", count=2, s="s") == "You may look 2 more times before you answer."
    with pytest.raises(prompts.PromptError, match="looks_left"):
        prompts.phrase("looks_left", count=1)


def test_a_failure_reads_as_one_sentence_from_its_parts() -> None:
    error = ErrorInfo("BinderException", "no column x", line=2, line_text="ehr.sql(q)", call="ehr.sql")
    assert context.trace_text(error, "", "printed\n") == (
        "The code failed with BinderException at line 2: `ehr.sql(q)` (raised inside ehr.sql):\nno column x\n"
        "Printed output:\nprinted")
    assert context.trace_text(None, prompts.phrase("soft_unset"), "") == \
        "The code ran without an error, but the code did not set `answer`."
