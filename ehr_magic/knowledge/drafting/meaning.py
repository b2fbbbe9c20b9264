"""What tables and columns mean, drafted from their names, values and joins with general rules.

- A dictionary is a table with a key (a code, an item id) that other tables refer to, or
  few columns, and a name, label or description that varies from code to code. Its text
  columns are lookup columns however many distinct values they have.
- Repeated text in other tables (drug names, test names, specimen types, units) gives
  lookup columns too; identifiers (keys, references, columns named for what they identify,
  such as a patient ``pt``), free text and personal data never do.
- A unit column is known by its values ('mg/dL', '%', 'bpm'), never by its name alone.
- Code columns are described as codes, never as numbers written as text.
- A column of few values lists the commonest, about a line of them (long names cost tokens in
  every prompt that describes the table); a second column of the same values (a stay's last
  care unit) names the first instead of listing them again.
- One line per table says what a row is, which tables refer to it and its size; the main
  columns say in words what they hold (``chart time``) or point to (``item (-> lab items)``)
  when their names do not already say it, words that also let a question find the table.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence

from ehr_magic.identifiers import text_literal
from ehr_magic.knowledge.drafting import naming
from ehr_magic.knowledge.drafting.joins import Join, sql_name
from ehr_magic.knowledge.drafting.profiling import VOCABULARY_MAX, Column, Table

SHOWN_VALUES = 8  # values written into a column's description
SHOWN_CHARACTERS = 100  # of those values' text, about
MIN_SHOWN = 3  # values written however long they are
NAMED_CODES = 0.9  # a code column with fewer code-shaped values than this share holds names too
NAMED_REFERRERS = 4  # a table referred to by more is a hub: the tables are counted, not named
REPEATED_VOCABULARY_MAX = 20_000  # distinct terms of a strongly repeated column still worth a lookup
LINE_PARTS = 10  # columns named in a table's line
# A database's own comments (COMMENT ON) are kept to this many characters, so that a paragraph of
# documentation does not crowd the prompt: a column's, a table's line (its first sentence), and
# a table's whole comment in its description.
COLUMN_COMMENT_CHARACTERS = 200
TABLE_COMMENT_CHARACTERS = 160
TABLE_DESCRIPTION_CHARACTERS = 600
_DICTIONARY_COLUMNS = 8  # a table this narrow with a key and a label is a dictionary even if nothing refers to it
# How to read a column, advice to the model: not what the column holds, so not words a question finds it by
CODES_AS_TEXT = "codes, compared as stored text"
COMPARE_AS_TEXT = "compare codes as stored text"
FIND_BY_LOOKUP = "find them with ehr.lookup"
CAST_NUMBERS = "(use TRY_CAST)"
ADVICE = (CODES_AS_TEXT, COMPARE_AS_TEXT, FIND_BY_LOOKUP, CAST_NUMBERS)


# What an id stands for, from the words of its table and name: general record-keeping words.
_ROLES = (({"patient", "person", "subject", "member", "client", "resident"}, "a patient id"),
          ({"admission", "encounter", "visit", "hospitalization", "episode"}, "a visit id"),
          ({"stay"}, "a stay id"))
_ID_WORDS = {"id", "ids", "key", "keys", "identifier", "number", "num", "no", "nr"}


def _role(*names: str) -> str:
    said = {naming.singular(w) for name in names for w in naming.read(name)}
    return next((role for words, role in _ROLES if said & words), "")


def identifies(table: Table, column: Column, joined: Iterable[str] = ()) -> bool:
    """Whether ``column`` holds identifiers: the key, a reference to another table, or short
    code-shaped values under a name that says an id (``test_no``) or names only what it
    identifies (``pt``, ``visit#``; not ``encounter_class``)."""
    if column.name == table.key or column.name in joined:
        return True
    if not (column.text and column.spaced < 0.01 and column.codes >= 0.99):
        return False
    about = naming.meaningful(column.original or column.name)
    return bool(set(column.words) & _ID_WORDS) or bool(about) and all(_role(word) for word in about)


def _label(column: Column) -> bool:
    """Text that names things: letters, not an identifier, not personal, not a long note."""
    return (column.text and column.non_null > 0 and not column.personal and not column.identifier_like
            and column.letters >= 0.5 and column.avg_length <= 200)


def is_dictionary(table: Table, referenced: int, refers: bool = False) -> bool:
    """A table mapping a code to a name or description (see the module docstring);
    ``referenced``: how many other tables refer to it; ``refers``: whether it refers to another
    table. Entries have no times, but for the validity dates of a dictionary that several tables
    refer to by its names (a concept table). A narrow table that nothing refers to is one unless it
    refers to another: then its rows belong to that table's (a patient's identifiers, a reading's
    parts)."""
    keyed = bool(table.unique) or table.composite is not None
    if not keyed or table.rows < 2:
        return False
    columns = [c for c in table.columns.values() if c.name != table.row_number]
    varied = [c for c in columns if _label(c) and c.distinct >= 0.3 * table.rows and c.name not in table.unique]
    named = [c for c in columns if _label(c) and c.label_like and c.distinct >= 0.3 * table.rows
             and c.name != table.key]
    if any(c.time for c in columns) and not (referenced >= 2 and named):
        return False  # events happen at a time; dictionary entries do not
    textual = [c for c in columns if c.text or c.name in table.unique]
    mostly_text = len(textual) * 2 >= len(columns)
    return bool(varied) and mostly_text and (referenced > 0 or (len(columns) <= _DICTIONARY_COLUMNS and not refers))


def lookup_columns(table: Table, dictionary: bool, joined: Iterable[str] = ()) -> list[str]:
    """Columns whose stored values are worth looking up (see the module docstring); ``joined``:
    the columns that refer to other tables."""
    found = []
    joined = set(joined)
    for column in table.columns.values():
        if not _label(column) or column.distinct < 2 or identifies(table, column, joined):
            continue
        if dictionary and column.name not in table.unique and not codes_only(column):
            found.append(column.name)
            continue
        repeats = column.distinct * 2 <= column.non_null
        limit = REPEATED_VOCABULARY_MAX if column.distinct * 10 <= column.non_null else VOCABULARY_MAX
        if repeats and column.distinct <= limit and column.avg_length <= 120 and not codes_only(column):
            found.append(column.name)
    return found


def codes_only(column: Column) -> bool:
    """Whether a column named or shaped like a code holds codes only: one named so whose values
    are mostly not code-shaped and have words holds names too (event codes that carry a drug's name,
    'MEDICATION//Heparin Flush//Administered'), which are looked up like names; lists of codes
    ('518.81, J96.00') are codes still."""
    return column.code_like and not (column.text and column.codes < NAMED_CODES and column.worded >= NAMED_CODES)


def lists_values(table: Table, column: Column, joins: dict[str, Join], vocabulary: bool) -> bool:
    """Whether the column's description lists its values (``describe_column``)."""
    if column.name in (table.key, table.row_number) or column.name in joins or column.distinct == 1:
        return False
    return bool(column.values) and (vocabulary or column.code_like)


def same_values(column: Column, listed: Iterable[Column]) -> Column | None:
    """The first of the ``listed`` columns (whose descriptions list their values) holding every value
    of ``column``, when both profiles hold every value: a last care unit has the first one's values,
    said once (even when the list is cut: the rest are found by a lookup of either)."""
    if not column.values or len(column.values) < column.distinct:
        return None
    own = {value for value, _ in column.values}
    return next((other for other in listed if len(other.values) == other.distinct
                 and own <= {value for value, _ in other.values}), None)


def _examples(column: Column) -> str:
    """A code column's examples as its description writes them: text quoted, numbers as they are,
    within the characters a value list gets."""
    shown = shown_values(column.examples)
    return ", ".join(text_literal(v) if column.text else v for v in shown)


def shown_values(values: Sequence[str]) -> list[str]:
    """The values a column's description lists, of ``values`` (commonest first): at most
    ``SHOWN_VALUES`` and about ``SHOWN_CHARACTERS`` of text (long names cost tokens in every prompt;
    ehr.lookup finds the rest), but at least ``MIN_SHOWN`` of them."""
    shown: list[str] = []
    length = 0
    for value in values[:SHOWN_VALUES]:
        length += len(value) + 4  # quotes, comma, space
        if len(shown) >= MIN_SHOWN and length > SHOWN_CHARACTERS:
            break
        shown.append(value)
    return shown


def describe_column(table: Table, column: Column, joins: dict[str, Join], vocabulary: bool,
                    values_of: Column | None = None, comment: str = "") -> str:
    """One line about a column: type, role, range or values (``values_of``: an earlier column whose
    listed values hold all of its own, named instead of listing them again), emptiness. With the
    column's ``comment`` in the database first: what its names suggest (a patient id) is then not
    said, nor the table it refers to when the comment names it."""
    if column.non_null == 0:
        text = f"{column.dtype}, always empty in this data."
        return with_comment(text, comment) if comment else text
    lists = lists_values(table, column, joins, vocabulary)
    parts = []
    shown_comment = one_line(comment, COLUMN_COMMENT_CHARACTERS)  # what the description will say of it

    def role(*names: str) -> str:
        return "" if comment else _role(*names)

    if column.name == table.row_number:
        # the same words whether or not it is the table's key: said once by the index for every table
        # that has it (row numbers join nothing: a convention says so)
        parts.append("the unique row number")
    elif column.name == table.key:
        said = role(table.original or table.name, column.original or column.name)
        parts.append("the unique key" + (f"; {said}" if said else ""))
    elif column.name not in joins and identifies(table, column):
        said = role(column.original or column.name)
        parts.append(f"{said} (an identifier)" if said else "an identifier")
    if column.name in joins:
        join = joins[column.name]
        # the target's key named as this column is said by the table alone ("refers to patients")
        target = join.target if join.key == column.name and not join.also else f"{join.target}.{sql_name(join.key)}"
        said = role(join.target, join.key)
        if not re.search(rf"(?<![\w.]){re.escape(target)}(?![\w])", shown_comment, re.IGNORECASE):
            parts.append(f"refers to {target}" + (f" ({said})" if said else ""))
    if column.unit_like and column.name not in joins:
        parts.append("a unit of measure")
    if column.name == table.key or column.name == table.row_number or column.name in joins:
        if column.code_like and column.text:
            parts.append(CODES_AS_TEXT)
    elif column.values and column.distinct == 1:
        parts.append(f"always {text_literal(column.values[0][0])}")
    elif lists and values_of is not None:
        every = column.distinct == values_of.distinct
        parts.append(f"the same {count(column.distinct, 'value')} as {values_of.name}" if every
                     else f"{column.distinct} of the values of {values_of.name}")
    elif lists and comment and column.distinct == len(column.values) and all(
            re.search(rf"(?<!\w){re.escape(value)}(?!\w)", shown_comment) for value, _ in column.values):
        parts.append(count(column.distinct, "value"))  # the comment shown writes each of them, as stored
    elif lists:  # a few codes are shown: sex 'F', 'M'
        listed = shown_values([value for value, _ in column.values])
        shown = ", ".join(text_literal(v) for v in listed)
        more = f" and {column.distinct - len(listed)} more" if column.distinct > len(listed) else ""
        parts.append(f"{count(column.distinct, 'value')} ({shown}{more})")
    elif vocabulary:
        examples = _examples(column)  # a code column that holds names too: how its codes are written
        parts.append(f"{distinct(column, 'distinct term')}" + (f" (e.g. {examples})" if examples else "")
                     + f", {FIND_BY_LOOKUP}")
    elif column.day_number:
        span = "" if column.personal else f", {_day(column.low)} to {_day(column.high)}"
        parts.append(f"dates written as YYYYMMDD numbers{span} "
                     f"(as a date: strptime({sql_name(column.name)}::VARCHAR, '%Y%m%d'))")
    elif column.code_like and column.dtype != "BOOLEAN":
        examples = _examples(column)
        parts.append(f"a code ({distinct(column, 'distinct code')}" + (f", e.g. {examples}" if examples else "")
                     + (f"); {COMPARE_AS_TEXT}" if column.text else ")"))
    elif column.low is not None and not column.personal:
        same = column.low == column.high
        parts.append(f"always {show(column.low)}" if same else _span(column.low, column.high))
    elif column.text and not column.personal:
        parts.append(distinct(column, "distinct value"))
    if column.text and not column.personal and not column.code_like and 0.2 <= column.numeric < 1:
        parts.append(f"{percent(column.numeric, 1)} of values are numbers written as text {CAST_NUMBERS}")
    empty = table.rows - column.non_null
    if empty:
        parts.append(f"{percent(empty, table.rows)} empty")
    text = f"{column.dtype}, " + "; ".join(parts) + "." if parts else f"{column.dtype}."
    return with_comment(text, comment) if comment else text


def line_parts(table: Table, joins: dict[str, Join], dictionaries: set[str], tables: dict[str, Table]
               ) -> dict[str, str]:
    """The main columns of a row in words, at most ``LINE_PARTS`` of them, each with its phrase
    (``admitDateTime``: admit date/time; a reference says what it points to: ``item (-> lab items)``)."""
    parts: dict[str, str] = {}
    for column in table.columns.values():
        if column.non_null == 0 or column.name == table.row_number or (
                column.name == table.key and column.name not in joins):
            continue
        name = naming.phrase(column.original or column.name)
        join = joins.get(column.name)
        if join is not None:
            target = tables[join.target]
            pointed = naming.entity(target.original or target.name)
            said = naming.meaningful(column.original or column.name)
            shared = said & naming.meaningful(target.original or target.name)
            if shared:  # patient_id -> patient_demographics: "patient"
                pointed = " ".join(w for w in column.words if w not in naming.GENERIC)
            if join.target in dictionaries:
                about = " ".join(w for w in column.words if w not in naming.GENERIC) or pointed
                title = _title(target)
                name = about if about == title else f"{about} (-> {title})"
            else:
                name = pointed
        if name not in parts.values():
            if len(parts) == LINE_PARTS:
                parts["..."] = "..."
                break
            parts[column.name] = name
    return parts


def table_line(table: Table, referrers: list[str], skip: int = 0, comment: str = "") -> str:
    """What one row is (the name's first ``skip`` words only say the dataset: ``naming.dataset_words``;
    the first sentence of the table's ``comment`` in the database, when it has one, says it in its
    makers' words), the tables that refer to it, and its size (its columns say what they hold)."""
    said = first_sentence(comment, TABLE_COMMENT_CHARACTERS) if comment else ""
    line = ended(said) if said else f"One row per {naming.entity(table.original or table.name, skip)}."
    if len(referrers) > NAMED_REFERRERS:
        # a hub (patients, visits): how many refer to it says what it is; their own columns say the joins
        line += f" Referred to by {len(referrers)} tables."
    elif referrers:
        line += f" Referred to by {', '.join(referrers)}."
    return f"{line} {count(table.rows, 'row')}."


def with_comment(text: str, comment: str) -> str:
    """A column's drafted description with its comment in the database (what its makers say it
    holds) after the type, in place of what its name suggests: ``VARCHAR, Admitting service. 3
    values ('MED', 'SURG')``."""
    said = one_line(comment, COLUMN_COMMENT_CHARACTERS)
    kind, _, rest = text.partition(", ")
    if not rest:
        return f"{kind.rstrip('.')}, {ended(said)}"
    return f"{kind}, {ended(said)} {rest[0].upper()}{rest[1:]}"


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), cut at a word to at most ``limit``
    characters, with "..." where it was cut."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[:limit - 3].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."


_SENTENCE_END = re.compile(r"(?<=[a-z0-9)][.!?]) (?=[A-Z])")


def first_sentence(text: str, limit: int) -> str:
    """The first sentence of ``text`` (up to a full stop followed by a capital), on one line, at
    most ``limit`` characters."""
    return one_line(_SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0], limit)


def after_first_sentence(text: str, limit: int) -> str:
    """What ``text`` says after its first sentence (all of it when that sentence is cut: the line
    holding it shows only its start), on one line, at most ``limit`` characters."""
    line = " ".join(text.split())
    parts = _SENTENCE_END.split(line, maxsplit=1)
    if len(parts[0]) > TABLE_COMMENT_CHARACTERS:
        return one_line(line, limit)
    return one_line(parts[1], limit) if len(parts) > 1 else ""


def ended(sentence: str) -> str:
    """``sentence`` with a full stop unless it already ends as a sentence does."""
    return sentence if sentence.endswith((".", "!", "?", "...")) else sentence + "."


def with_phrase(column: str, text: str, phrase: str) -> str:
    """A column's description with its phrase in words, when the name and the description do
    not already hold those words (``admitdatetime``: ``TIMESTAMP, admit date/time, ...``)."""
    said = set(re.findall(r"[a-z0-9]+", f"{column} {text}".lower().replace("_", " ")))
    if set(re.findall(r"[a-z0-9]+", phrase.lower())) <= said:
        return text
    kind, _, rest = text.partition(", ")
    return f"{kind}, {phrase}, {rest}" if rest else f"{kind.rstrip('.')}, {phrase}."


def _title(table: Table) -> str:
    """A table's name as words, without words that only mark it as a table (``d_``, ``dim``) or a
    view (``vw_``)."""
    return " ".join(w for w in naming.unmarked(table.words) if w not in naming.GENERIC) or table.name


def _day(number: object) -> str:
    """A YYYYMMDD number as the date it writes: 20240301 -> 2024-03-01."""
    text = str(number)
    return f"{text[:4]}-{text[4:6]}-{text[6:8]}"


def _span(low: object, high: object) -> str:
    """``low to high``; times spanning more than a day by their days, which say what the range
    tells (the years and months the data covers) in half the words."""
    if isinstance(low, dt.datetime) and isinstance(high, dt.datetime) and low.date() != high.date():
        return f"{low.date().isoformat()} to {high.date().isoformat()}"
    return f"{show(low)} to {show(high)}"


def show(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") if value.time() != dt.time() else value.strftime("%Y-%m-%d")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def distinct(column: Column, noun: str) -> str:
    """``5,347 distinct terms``: ``about`` an estimate (HyperLogLog), ``at least`` a count of a big
    table's sample, which the whole table may outnumber."""
    counted = count(column.distinct, noun)
    if column.exact:
        return f"at least {counted}" if column.sampled else counted
    return f"about {counted}" + (" or more" if column.sampled else "")


def percent(part: int | float, whole: int) -> str:
    """``part`` of ``whole`` as a whole percent, never rounded to 0% or 100% when it is neither
    (one value in 200 rows is not "100% empty")."""
    share = 100 * part / whole
    if share < 1:
        return "<1%"
    return f"{share:.0f}%" if share <= 99 or part == whole else ">99%"
