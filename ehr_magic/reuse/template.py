"""A remembered cell as a template: which values of its question its code carries.

``analyse(entry_id, question, code, detector)`` links the code's literals to the
question's values: a string literal whose words occur in the question is a
vocabulary value (typed by the column that stores it, preferring the column the code
compares it with); a literal equal to one *rendering* of a question's id, number or
time (``'2099-01-01 00:00:00'`` is the start of "last year", ``3`` the months of
"3 months ago") carries that value. Linked values become *slots*; ids, numbers and
times the code does not carry visibly stay *fixed* (a new question must have the
same ones). The question with slots replaced by their types is the template text,
the code with linked literals replaced is the *skeleton*: cells with the same
skeleton answer the same kind of question. Cells of the same code *structure* check
each other's links (``inconsistent_links``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.reuse.lexicon import operators
from ehr_magic.reuse.literals import Literal, code_literals
from ehr_magic.reuse.values import Token, Value, ValueDetector, vocab_type
from ehr_magic.text import normalise, stem

# Renderings that are bare small numbers; they only carry a time value where the
# code says which unit the number counts (an INTERVAL, a `months=` argument...).
_SMALL_TIME_FORMATS = frozenset({"offset", "n"})
_UNIT_WORDS = frozenset({"year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
                         "minute", "minutes", "interval"})
_WILDCARDS = re.compile(r"^[%_]+|[%_]+$")


@dataclass(frozen=True)
class Link:
    """A literal of the code that carries a slot: written as ``format`` of the value
    (``mode`` ``exact``), or containing the value inside a pattern (``contains``)."""

    literal: int
    slot: int
    format: str
    mode: str = "exact"


@dataclass
class Slot:
    """A value of the cell's question that its code carries (and a new question replaces)."""

    type: str
    kind: str
    value: Value
    spans: list[tuple[int, int]]
    rank: int = 0
    context: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())  # words before / after
    pattern: bool = False  # the code matches it inside a pattern ('%sepsis%'): any matching words will do

    @property
    def label(self) -> str:
        return f"{self.type}#{self.rank}"


@dataclass
class Template:
    """One analysed memory entry."""

    entry_id: int
    question: str
    code: str
    literals: list[Literal]
    slots: list[Slot]
    links: list[Link]
    fixed: list[Value]
    tokens: tuple[str, ...]
    skeleton: str
    origin: str = "accepted"
    stems: tuple[str, ...] = ()  # the template words, stemmed (placeholders kept)
    ops: Counter[str] = field(default_factory=Counter)  # operator words of the template text
    structure: str = ""  # the code with every literal masked
    excluded: frozenset[tuple[int, str, str]] = frozenset()  # links refused by other cells

    @property
    def signature(self) -> tuple:
        return (tuple(sorted(s.type for s in self.slots)),
                tuple(sorted((v.meaning for v in self.fixed), key=repr)))

    def links_of(self, literal: int) -> list[Link]:
        return [link for link in self.links if link.literal == literal]


def placeholder(value_type: str) -> str:
    return f"<{value_type}>"


def analyse(entry_id: int, question: str, code: str, detector: ValueDetector, *, origin: str = "accepted",
            exclude: frozenset[tuple[int, str, str]] = frozenset()) -> Template:
    """Link ``code``'s literals to ``question``'s values (see the module doc).

    ``exclude`` holds ``(literal index, value type, format)`` links not to make
    (found coincidental by ``inconsistent_links``)."""
    literals = code_literals(code)
    detected = detector.detect(question, vocab_types=set())
    candidates: list[Value] = [v for v in detected.values if v.hard or v.kind == "op"]
    explanations: dict[int, list[tuple[Value, str, str]]] = {}
    vocab_values: dict[tuple, Value] = {}
    for index, literal in enumerate(literals):
        if literal.kind == "string":
            for value, mode in _vocabulary_values(literal, question, detected.tokens, detector):
                if (index, value.type, "value") in exclude:
                    continue
                known = vocab_values.setdefault((value.start, value.type, value.value), value)
                explanations.setdefault(index, []).append((known, "value", mode))
        for value in candidates:
            for name, text in value.renderings.items():
                if (index, value.type, name) not in exclude and _carries(literal, value, name, text):
                    explanations.setdefault(index, []).append((value, name, "exact"))
    # A value inside a linked vocabulary value is part of it (a dose in a drug name).
    linked_vocab = [v for v in vocab_values.values()]
    dropped = {id(v) for v in candidates if any(w.covers(v) or w.overlaps(v) for w in linked_vocab)}
    for index in list(explanations):
        explanations[index] = [e for e in explanations[index] if id(e[0]) not in dropped]
        if not explanations[index]:
            del explanations[index]
    # Slots: one per distinct (type, value), all its spans in the question.
    slots: list[Slot] = []
    slot_of: dict[tuple, int] = {}
    links: list[Link] = []
    for index in sorted(explanations):
        for value, name, mode in explanations[index]:
            key = (value.type, value.key)
            if key not in slot_of:
                slot_of[key] = len(slots)
                slots.append(Slot(value.type, value.kind, value, [value.span]))
            slot = slots[slot_of[key]]
            if value.span not in slot.spans:
                slot.spans.append(value.span)
            link = Link(index, slot_of[key], name, mode)
            if link not in links:
                links.append(link)
    # The same vocabulary value found at several places of the question is one slot.
    for slot in slots:
        if slot.kind == "vocab":
            wanted = normalise(slot.value.text)
            for start, end in _occurrences(wanted, detected.tokens):
                if (start, end) not in slot.spans:
                    slot.spans.append((start, end))
        slot.spans.sort()
    # Overlapping slots (two readings of one span): keep the longer, drop the other's links.
    keep = _non_overlapping(slots)
    if len(keep) < len(slots):
        remap = {old: new for new, old in enumerate(keep)}
        links = [Link(k.literal, remap[k.slot], k.format, k.mode) for k in links if k.slot in remap]
        slots = [slots[i] for i in keep]
    used_spans = [span for slot in slots for span in slot.spans]
    fixed = [v for v in candidates if v.hard and id(v) not in dropped
             and not any(_overlap(v.span, s) for s in used_spans)]
    fixed = _one_per_span(fixed)
    _rank(slots, links, literals)
    for index, slot in enumerate(slots):
        slot.context = value_context(detected.tokens, slot.spans[0])
        slot.pattern = slot.kind == "vocab" and all(k.mode == "contains" for k in links if k.slot == index)
    template = Template(entry_id, question, code, literals, slots, links, fixed,
                        residual_tokens(detected.tokens, [(s.spans, s.type) for s in slots]
                                        + [([v.span], v.type) for v in fixed]),
                        "", origin)
    template.skeleton = skeleton(template)
    template.stems = tuple(stem(t) for t in template.tokens)
    template.ops = operators(template.tokens)
    template.structure = structure(code, literals)
    template.excluded = frozenset(exclude)
    return template


def structure(code: str, literals: list[Literal]) -> str:
    """The code with every literal masked: cells with equal structures differ in literals only."""
    pieces, last = [], 0
    for literal in literals:
        pieces.append(code[last:literal.start])
        pieces.append("?")
        last = literal.end
    pieces.append(code[last:])
    return " ".join("".join(pieces).split())


def inconsistent_links(templates: list[Template]) -> set[tuple[int, str, str]]:
    """Links that other cells of the same structure contradict.

    When one cell's literal at position *i* equals the rendering of its number
    ("four" -> ``4``) but another cell of the same structure has a number too and a
    literal at *i* that is not its rendering, position *i* does not carry the number:
    the first link was a coincidence (``365 // 4`` for "3-month" next to "top four").
    """
    bad: set[tuple[int, str, str]] = set()
    if len(templates) < 2:
        return bad
    linked: set[tuple[int, str, str]] = set()
    for template in templates:
        for link in template.links:
            linked.add((link.literal, template.slots[link.slot].type, link.format))
    for index, value_type, fmt in linked:
        for template in templates:
            if index >= len(template.literals):
                continue
            values = [s.value for s in template.slots if s.type == value_type]
            values += [v for v in template.fixed if v.type == value_type]
            if not values:
                continue
            literal = template.literals[index]
            if not any(fmt in v.renderings and _carries(literal, v, fmt, v.renderings[fmt]) for v in values) \
                    and not (value_type.startswith("vocab:") and any(
                        link.literal == index for link in template.links)):
                bad.add((index, value_type, fmt))
                break
    return bad


def residual_tokens(tokens: list[Token], replaced: list[tuple[list[tuple[int, int]], str]]) -> tuple[str, ...]:
    """The question's words with each value span replaced by its type's placeholder."""
    marks: dict[int, str] = {}
    covered: set[int] = set()
    for spans, value_type in replaced:
        for start, end in spans:
            inside = [i for i, t in enumerate(tokens) if t.start < end and start < t.end]
            if not inside:
                continue
            marks.setdefault(inside[0], placeholder(value_type))
            covered.update(inside)
    out = []
    for i, token in enumerate(tokens):
        if i in marks:
            out.append(marks[i])
        elif i not in covered:
            out.append(token.text)
    return tuple(out)


def value_context(tokens: list[Token], span: tuple[int, int], width: int = 2) -> tuple[frozenset[str], frozenset[str]]:
    """Stems of the ``width`` words before and after a value: what tells two values of
    the same type apart ("top *three*" vs "*60* or above")."""
    before = [stem(t.text) for t in tokens if t.end <= span[0]][-width:]
    after = [stem(t.text) for t in tokens if t.start >= span[1]][:width]
    return frozenset(before), frozenset(after)


def skeleton(template: Template) -> str:
    """The code with every linked literal replaced by its slot's label and format."""
    code = template.code
    pieces = []
    last = 0
    for index, literal in enumerate(template.literals):
        links = template.links_of(index)
        if not links:
            continue
        first = links[0]
        slot = template.slots[first.slot]
        pieces.append(code[last:literal.start])
        pieces.append(f"\u27e6{slot.label}:{first.format}:{first.mode}\u27e7")
        last = literal.end
    pieces.append(code[last:])
    return " ".join("".join(pieces).split())


# -- helpers -------------------------------------------------------------------------------


def _carries(literal: Literal, value: Value, name: str, text: str) -> bool:
    """True when ``literal`` is ``value`` written as rendering ``name`` (``text``)."""
    if literal.kind == "function" or value.kind == "op":
        return literal.kind == "function" and value.kind == "op" and name == literal.where and (
            literal.value.lower() == text.lower())
    if literal.keyword in ("limit", "offset") and value.kind != "number":
        return False
    if value.kind == "time" and name in _SMALL_TIME_FORMATS:
        if literal.kind != "number":
            return False
        units = {literal.keyword or ""} | {s.lower() for s in literal.context_strings}
        if not units & _UNIT_WORDS:
            return False
    if literal.kind == "number":
        try:
            return float(literal.value) == float(text)
        except ValueError:
            return False
    return literal.value == text


def _vocabulary_values(literal: Literal, question: str, tokens: list[Token],
                       detector: ValueDetector) -> list[tuple[Value, str]]:
    """Vocabulary values of the question that this string literal carries."""
    text = literal.value
    mode = "exact"
    inner = _WILDCARDS.sub("", text)
    if inner != text and literal.op in ("like", "ilike"):  # a pattern ('%sepsis%'): the value is inside
        mode, text = "contains", inner
    wanted = normalise(text)
    if not wanted or wanted.replace(" ", "").isdigit() or len(wanted) < 2:
        return []
    spans = _occurrences(wanted, tokens)
    if not spans:
        return []
    columns = _columns_for(literal, text, detector)
    if not columns and mode == "contains":
        columns = _pattern_column(literal, detector)
    if not columns:
        return []
    table, column, stored = columns[0]
    if mode == "contains":
        stored = text
    value_type = vocab_type(table, column)
    found = []
    for start, end in spans:
        found.append((Value("vocab", value_type, start, end, question[start:end], stored, {"value": text},
                            ("vocab", value_type, stored)), mode))
    return found


def _pattern_column(literal: Literal, detector: ValueDetector) -> list[tuple[str, str, str]]:
    """The column a pattern literal is matched against, when some row matches it."""
    table, column = literal.table, literal.column_name
    if not table or not column or table not in _tables(detector) or column not in _columns(detector, table):
        return []
    try:
        found = detector.ehr.sql(f"SELECT 1 FROM {quote(table)} WHERE CAST({quote(column)} AS VARCHAR) ILIKE ? LIMIT 1",
                                 [literal.value]).height
    except QUERY_FAILURES:  # a pattern we cannot check is not a value
        return []
    return [(table, column, literal.value)] if found else []


def _columns_for(literal: Literal, text: str, detector: ValueDetector) -> list[tuple[str, str, str]]:
    """Stored (table, column, value) equal to ``text``, narrowed to the compared column."""
    vocabulary = detector.vocabulary
    wanted_column = literal.column_name
    wanted_table = literal.table
    if wanted_column is None and literal.context_strings:  # ehr.lookup('table', 'column', 'text')
        names = [s for s in literal.context_strings]
        tables = [s for s in names if s in _tables(detector)]
        for table in tables:
            for name in names:
                if name in _columns(detector, table):
                    wanted_table, wanted_column = table, name
    if wanted_column is not None:
        tables = [wanted_table] if wanted_table in _tables(detector) else [
            t for t in _tables(detector) if wanted_column in _columns(detector, t)]
        for table in tables:
            vocabulary.add_column(table, wanted_column)
    hits = vocabulary.find(text)
    if wanted_column is not None:
        hits = [h for h in hits if h[1] == wanted_column and (wanted_table is None or wanted_table not in
                                                               _tables(detector) or h[0] == wanted_table)]
    exact = [h for h in hits if h[2] == text]
    return sorted(exact or hits)


def _tables(detector: ValueDetector) -> set[str]:
    cached = getattr(detector, "_table_names", None)
    if cached is None:
        cached = set(detector.ehr.tables())
        detector._table_names = cached  # type: ignore[attr-defined]  # a cache ValueDetector does not declare
    return cached


def _columns(detector: ValueDetector, table: str) -> dict[str, str]:
    cache = getattr(detector, "_column_types", None)
    if cache is None:
        cache = {}
        detector._column_types = cache  # type: ignore[attr-defined]  # a cache ValueDetector does not declare
    if table not in cache:
        cache[table] = detector.ehr.columns(table)
    return cache[table]


def _occurrences(wanted: str, tokens: list[Token]) -> list[tuple[int, int]]:
    words = wanted.split()
    n = len(words)
    texts = [t.text for t in tokens]
    return [(tokens[i].start, tokens[i + n - 1].end) for i in range(len(tokens) - n + 1) if texts[i:i + n] == words]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


_KIND_ORDER = {"vocab": 0, "time": 1, "id": 2, "number": 3}


def _non_overlapping(slots: list[Slot]) -> list[int]:
    order = sorted(range(len(slots)), key=lambda i: (-max(e - s for s, e in slots[i].spans),
                                                      _KIND_ORDER.get(slots[i].kind, 4)))
    keep: list[int] = []
    for i in order:
        if all(not _overlap(a, b) for j in keep for a in slots[i].spans for b in slots[j].spans):
            keep.append(i)
    return sorted(keep)


def _one_per_span(values: list[Value]) -> list[Value]:
    """Of several readings of one span (an id that is also a number), keep the most specific."""
    rank = {"time": 0, "id": 1, "number": 2}
    chosen: list[Value] = []
    for value in sorted(values, key=lambda v: (rank.get(v.kind, 3), -(v.end - v.start))):
        if not any(_overlap(value.span, c.span) for c in chosen):
            chosen.append(value)
    return sorted(chosen, key=lambda v: v.start)


def _rank(slots: list[Slot], links: list[Link], literals: list[Literal]) -> None:
    """Number slots of the same type by where the code first uses them."""
    first: dict[int, int] = {}
    for link in links:
        position = literals[link.literal].start
        first[link.slot] = min(first.get(link.slot, position), position)
    by_type: dict[str, list[int]] = {}
    for i, slot in enumerate(slots):
        by_type.setdefault(slot.type, []).append(i)
    for indexes in by_type.values():
        for rank, i in enumerate(sorted(indexes, key=lambda i: first.get(i, 1 << 30))):
            slots[i].rank = rank
