"""Retrieval: schema isolation, trusted-first ranking, the two methods, exactness of the
indexes against brute force, and index refresh when another process changes the store."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from ehr_magic.memory import MemoryStore, MemoryStoreError
from ehr_magic.memory.index import TRUSTED_BONUS, make_index
from ehr_magic.memory.similarity import default_similarity, default_tokens, mask_values

QUESTIONS = [
    "How many patients were admitted in 2100?",
    "What is the gender of patient 10004235?",
    "When did patient 10021118 have the last minimum creatine kinase value on their first hospital encounter?",
    "What are the top five most frequent procedures since 2100?",
    "How is trazodone typically taken?",
    "Count the patients who received a red blood cells lab test in 2100.",
    "What was the first measurement of heart rate in patient 10004733's body since 22 days ago?",
    "Tell me the number of patients diagnosed with fibromyalgia since 2100.",
]


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    with MemoryStore(tmp_path / "memory.sqlite") as s:
        yield s


def test_masking_and_similarity() -> None:
    assert mask_values("Patient 10004235's 'aspirin 81 mg' on 2100-07-03 12:00, 07/2100, top three?") == (
        "patient num s val on date time date top num"
    )
    assert default_tokens("b a, A!") == ["a", "a", "b"]
    same = default_similarity("How many patients were admitted in 2100?", "how many patients were admitted in 2105")
    assert same == 100.0
    expected = (fuzz.ratio(["a", "b", "c"], ["a", "b", "d"]) + fuzz.ratio("a b c", "a b d")) / 2
    assert default_similarity("a b c", "a b d") == expected


def test_empty_store_and_k(store: MemoryStore) -> None:
    assert store.search("anything") == []
    store.add(QUESTIONS[0], "c0")
    assert store.search("anything", k=0) == []
    assert len(store.search("anything", k=10)) == 1
    with pytest.raises(MemoryStoreError, match="k must be"):
        store.search("x", k=-1)


def test_k_defaults_to_four_best_first(store: MemoryStore) -> None:
    for i, q in enumerate(QUESTIONS):
        store.add(q, f"code {i}", schema="s")
    hits = store.search("How many patients were admitted in 2104?", schema="s")
    assert len(hits) == 4
    assert hits[0].question == QUESTIONS[0] and hits[0].code == "code 0"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_schema_isolation(store: MemoryStore) -> None:
    store.add(QUESTIONS[0], "mimic code", schema="mimic-iv:1")
    store.add(QUESTIONS[0], "eicu code", schema="eicu:1")
    store.add(QUESTIONS[1], "other mimic code", schema="mimic-iv:1")
    for schema, code in [("mimic-iv:1", "mimic code"), ("eicu:1", "eicu code")]:
        for method in ("default", "levenshtein"):
            hits = store.search(QUESTIONS[0], k=10, schema=schema, method=method)
            assert all(h.schema == schema for h in hits)
            assert hits[0].code == code
    assert store.search(QUESTIONS[0], schema="omop:1") == []
    # schema=None: no filter, every entry is a candidate
    assert len(store.search(QUESTIONS[0], k=10)) == 3


def test_accepted_ranks_before_an_equally_similar_auto_entry(store: MemoryStore) -> None:
    auto = store.add("How many patients were admitted in 2101?", "auto code", origin="auto", schema="s")
    accepted = store.add("How many patients were admitted in 2100?", "accepted code", schema="s")
    hits = store.search("How many patients were admitted in 2102?", k=2, schema="s")
    assert [h.id for h in hits] == [accepted, auto]
    assert hits[0].score - hits[1].score == pytest.approx(TRUSTED_BONUS)


def test_trusted_bonus_yields_to_a_much_better_auto_match(store: MemoryStore) -> None:
    store.add("What is the gender of patient 10004235?", "accepted code", schema="s")
    auto = store.add("How many patients were admitted in 2100?", "auto code", origin="auto", schema="s")
    assert store.search("How many patients were admitted in 2102?", k=1, schema="s")[0].id == auto


def test_ties_prefer_accepted_then_seed_then_imported_then_newer(store: MemoryStore) -> None:
    q = "How many patients were admitted in 2100?"
    ids = {origin: store.add(q, f"{origin} code", origin=origin, schema="s")
           for origin in ("auto", "imported", "seed", "accepted")}
    newer = store.add(q, "second accepted code", schema="s")
    hits = store.search(q, k=5, schema="s")
    assert [h.id for h in hits] == [newer, ids["accepted"], ids["seed"], ids["imported"], ids["auto"]]


def test_origins_filter(store: MemoryStore) -> None:
    store.add(QUESTIONS[0], "a", schema="s")
    auto = store.add(QUESTIONS[0], "b", origin="auto", schema="s")
    hits = store.search(QUESTIONS[0], k=4, schema="s", origins=["auto"])
    assert [h.id for h in hits] == [auto]


def test_levenshtein_method_is_negative_edit_distance(store: MemoryStore) -> None:
    for i, q in enumerate(QUESTIONS):
        store.add(q, f"code {i}", origin="auto" if i % 2 else "accepted")
    query = "How many patients were admitted in 2101?"
    hits = store.search(query, method="levenshtein")
    expected = sorted((-Levenshtein.distance(query, q) for q in QUESTIONS), reverse=True)[:4]
    assert [h.score for h in hits] == expected


def _random_questions(rng: random.Random, n: int) -> list[str]:
    words = ("patient patients admitted many how what the of in was were last first lab test heart rate "
             "drug prescribed since ago days count number diagnosis procedure top most frequent").split()
    out = []
    for _ in range(n):
        length = rng.randint(3, 14)
        tokens = [rng.choice(words) if rng.random() > 0.2 else str(rng.randint(1, 10**rng.randint(1, 8)))
                  for _ in range(length)]
        out.append(" ".join(tokens) + rng.choice(["?", ".", ""]))
    return out


@pytest.mark.parametrize("method", ["default", "levenshtein"])
def test_index_is_exact_against_brute_force(method: str) -> None:
    rng = random.Random(5)
    questions = _random_questions(rng, 600)
    origins = [rng.choice(["accepted", "auto", "seed", "imported"]) for _ in questions]
    index = make_index(method)
    index.add_many((i + 1, q, o) for i, (q, o) in enumerate(zip(questions, origins)))
    for query in _random_questions(rng, 60) + questions[:10]:
        got = [round(h.score, 9) for h in index.search(query, 4)]
        if method == "default":
            scores = [default_similarity(query, q) + (TRUSTED_BONUS if o != "auto" else 0.0)
                      for q, o in zip(questions, origins)]
        else:
            scores = [-float(Levenshtein.distance(query, q)) for q in questions]
        assert got == [round(s, 9) for s in sorted(scores, reverse=True)[:4]]


def test_index_follows_changes_made_by_another_store_object(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    with MemoryStore(path) as kernel_a, MemoryStore(path) as kernel_b:
        first = kernel_a.add(QUESTIONS[0], "c0", schema="s", origin="auto")
        assert [h.id for h in kernel_b.search(QUESTIONS[0], schema="s")] == [first]  # b's index is built
        second = kernel_a.add(QUESTIONS[0] + " Really?", "c1", schema="s")
        assert {h.id for h in kernel_b.search(QUESTIONS[0], schema="s")} == {first, second}
        kernel_a.accept(first)
        assert kernel_b.search(QUESTIONS[0], schema="s")[0].origin == "accepted"
        kernel_a.delete(second)
        assert [h.id for h in kernel_b.search(QUESTIONS[0], schema="s")] == [first]
        kernel_a.accept(first, code="edited")
        assert kernel_b.search(QUESTIONS[0], schema="s")[0].code == "edited"


def test_index_rebuilds_when_the_change_log_was_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ehr_magic.memory import store as store_module

    monkeypatch.setattr(store_module, "CHANGE_LOG_KEEP", 2)
    path = tmp_path / "shared.sqlite"
    with MemoryStore(path) as a, MemoryStore(path) as b:
        ids = [a.add(f"{q} variant", f"c{i}", schema="s") for i, q in enumerate(QUESTIONS)]
        b.search("x", schema="s")
        for entry_id in ids[:5]:
            a.delete(entry_id)
        remaining = {h.id for h in b.search("x", k=10, schema="s")}
        assert remaining == set(ids[5:])


def test_many_deletions_compact_the_index(store: MemoryStore, tmp_path: Path) -> None:
    lines = tmp_path / "many.jsonl"
    lines.write_text("".join(
        f'{{"question": "question number {i} about patient {i} and drug d{i}", "code": "code {i}"}}\n'
        for i in range(1300)
    ))
    assert store.import_(lines) == 1300
    ids = sorted(e.id for e in store.list())
    store.search("question")
    other_process = sqlite3.connect(store.path)  # the triggers log what it deletes
    with other_process:
        other_process.execute("DELETE FROM entries WHERE id <= ?", (ids[1199],))
    other_process.close()
    hits = store.search("question number about patient and drug", k=200)
    assert {h.id for h in hits} == set(ids[1200:])
    assert store._indexes[("\x00all", "default")].index.empty_forms == 0
