"""The literals of a cell's code, with where they sit and what they are compared with.

``code_literals(code)`` walks the Python code (``ast``): string and number constants
become literals; a string that holds SQL is scanned (a small scanner, not a parser)
and its string and number tokens become literals too, each with the column it is
compared with (``admissions.subject_id = 10004235`` -> ``admissions.subject_id``,
table aliases resolved), the keyword before it (``LIMIT``, ``INTERVAL``) and its
exact span in the code, so that reuse can write another value in its place
(``replace_literals``). Parameters of ``ehr.sql(query, [params])`` get the context
of their ``?``. Aggregate names (``MAX(``, ``.max()``) are literals too.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import TypeGuard

# Aggregates a question names with a word ("maximum", "average"): reuse may swap them.
AGGREGATES = frozenset({"MAX", "MIN", "AVG", "SUM"})
METHODS = frozenset({"max", "min", "mean", "sum"})
_PLACEHOLDER = re.compile("\u27e6[^\u27e7]*\u27e7")
SQL_HINT = re.compile(r"^\s*(select|with)\b|\bselect\b[\s\S]*\bfrom\b", re.I)


@dataclass(frozen=True)
class Literal:
    """One literal of the code.

    ``start``/``end``: its span in the code, quotes included. ``value``: its value
    as text (unescaped). ``kind``: ``string``, ``number`` or ``function`` (an
    aggregate's name: SQL ``MAX(``, polars ``.max()``). ``where``: ``sql`` (a
    token inside an SQL string) or ``python``. ``column``: the column it is compared
    with (``table.column`` or ``column``), ``op`` the comparison, ``keyword`` the
    SQL keyword before it (limit, offset, interval) or the Python keyword argument.
    ``quote``: how to write a new string value here (``sql``, or a Python quote).
    """

    start: int
    end: int
    value: str
    kind: str
    where: str
    column: str | None = None
    op: str | None = None
    keyword: str | None = None
    quote: str = ""
    context_strings: tuple[str, ...] = ()  # other string arguments of the same Python call

    @property
    def table(self) -> str | None:
        return self.column.split(".")[0] if self.column and "." in self.column else None

    @property
    def column_name(self) -> str | None:
        return self.column.split(".")[-1] if self.column else None


def code_literals(code: str) -> list[Literal]:
    """Every literal of ``code`` in code order (empty when the code does not parse)."""
    return list(_code_literals(code))


@functools.lru_cache(maxsize=8192)
def _code_literals(code: str) -> tuple[Literal, ...]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ()
    offsets = _line_offsets(code)
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    params = _parameter_contexts(tree)
    found: list[Literal] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(parents.get(id(node)), ast.JoinedStr):
                continue
            span = _span(node, code, offsets)
            if span is None:
                continue
            start, end = span
            source = code[start:end]
            if SQL_HINT.search(node.value):
                found.extend(_sql_literals(node.value, source, start))
                continue
            quote = _python_quote(source)
            body = _string_body(source)
            if quote is None or body is None or body[2] != node.value:
                continue
            found.append(Literal(start, end, node.value, "string", "python", quote=quote,
                                 **_python_context(node, parents, params)))
        elif isinstance(node, ast.Constant) and _is_number(node.value):
            parent = parents.get(id(node))
            if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
                continue  # handled with its sign below
            span = _span(node, code, offsets)
            if span is not None:
                found.append(Literal(*span, _number_text(node.value), "number", "python",
                                     **_python_context(node, parents, params)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            span = _span(node.func, code, offsets)
            if span is not None:
                end = span[1]
                found.append(Literal(end - len(node.func.attr), end, node.func.attr, "function", "python"))
        elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
              and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool)):
            span = _span(node, code, offsets)
            if span is not None:
                found.append(Literal(*span, _number_text(-node.operand.value), "number", "python",
                                     **_python_context(node, parents, params)))
    found.sort(key=lambda lit: lit.start)
    return tuple(found)


def replace_literals(code: str, replacements: dict[Literal, str]) -> str:
    """``code`` with each literal's value replaced by a new value (quoted as needed)."""
    out = code
    for literal, value in sorted(replacements.items(), key=lambda item: -item[0].start):
        out = out[:literal.start] + write_literal(literal, value) + out[literal.end:]
    return out


def write_literal(literal: Literal, value: str) -> str:
    """How ``value`` is written in place of ``literal``."""
    if literal.kind == "number":
        return value
    if literal.kind == "function":
        return value.lower() if literal.value.islower() else value.upper() if literal.value.isupper() else value
    if literal.quote == "sql":
        return "'" + value.replace("'", "''") + "'"
    quote = literal.quote
    escaped = value.replace("\\", "\\\\").replace(quote[0], "\\" + quote[0])
    if len(quote) == 1:
        escaped = escaped.replace("\n", "\\n")
    return quote + escaped + quote


def can_write(literal: Literal, value: str, code: str) -> bool:
    """False when writing ``value`` would break the enclosing Python string."""
    if literal.where != "sql":
        return True
    text = write_literal(literal, value)
    return "\\" not in text and '"""' not in text and "'''" not in text and "\n" not in value


# -- SQL inside Python strings ----------------------------------------------------------------

# A small SQL scanner: enough to find literals and what they are compared with, and
# much faster than a full tokenizer (memory analyses thousands of cells).
_SQL_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<comment>--[^\n]*|/\*[\s\S]*?\*/)|(?P<string>'(?:[^']|'')*')"
    r"|(?P<ident>\"(?:[^\"]|\"\")*\")|(?P<number>(?<![\w.])(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+))"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)|(?P<op><=|>=|<>|!=|==|::|\|\||[=<>])|(?P<punct>[.,()])|(?P<other>.)")
_COMPARE = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=",
            "LIKE": "like", "ILIKE": "ilike"}
_KEYWORDS = {"LIMIT": "limit", "OFFSET": "offset", "INTERVAL": "interval"}
_NOT_COLUMNS = frozenset({"AND", "OR", "WHERE", "NOT", "IN", "ON", "SELECT", "WHEN", "THEN", "ELSE", "CASE",
                          "BETWEEN", "HAVING", "BY", "IS", "NULL", "AS", "FROM", "JOIN", "END", "DISTINCT"})


@dataclass(frozen=True)
class _Tok:
    kind: str  # string | ident | number | word | op | punct | other
    text: str  # as written
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def sql_tokens(sql: str) -> list[_Tok]:
    out = []
    for match in _SQL_TOKEN.finditer(sql):
        kind = match.lastgroup or "other"
        if kind in ("ws", "comment"):
            continue
        out.append(_Tok(kind, match.group(), match.start(), match.end()))
    return out


def _sql_literals(sql: str, source: str, offset: int) -> list[Literal]:
    """Literals of the SQL ``sql`` written as the Python string ``source`` at ``offset``."""
    body = _string_body(source)
    if body is None or body[2] != sql:  # escapes in the Python string: positions would not map
        return []
    base = offset + body[0]
    tokens = sql_tokens(sql)
    aliases = _aliases(tokens)
    found = []
    for i, token in enumerate(tokens):
        if token.kind == "word" and token.upper in AGGREGATES and _is_call(tokens, i):
            found.append(Literal(base + token.start, base + token.end, token.text, "function", "sql"))
            continue
        if token.kind not in ("string", "number"):
            continue
        column, op, keyword = _sql_context(tokens, i)
        column = _resolve(column, aliases)
        if token.kind == "string":
            value = token.text[1:-1].replace("''", "'")
            found.append(Literal(base + token.start, base + token.end, value, "string", "sql", column, op, keyword,
                                 quote="sql"))
        else:
            found.append(Literal(base + token.start, base + token.end, token.text, "number", "sql", column, op,
                                 keyword))
    return found


def _aliases(tokens: list[_Tok]) -> dict[str, str]:
    """``FROM labevents l JOIN d_labitems AS d`` -> {'l': 'labevents', 'd': 'd_labitems'}."""
    aliases: dict[str, str] = {}
    for i, token in enumerate(tokens[:-1]):
        if token.upper not in ("FROM", "JOIN") or not _is_name(tokens[i + 1]):
            continue
        j = i + 1
        name = _name(tokens[j]).lower()
        while j + 2 < len(tokens) and tokens[j + 1].text == "." and _is_name(tokens[j + 2]):
            j += 2
            name = _name(tokens[j]).lower()
        k = j + 1
        if k < len(tokens) and tokens[k].upper == "AS":
            k += 1
        if k < len(tokens) and _is_name(tokens[k]) and tokens[k].upper not in _CLAUSE_WORDS:
            aliases[_name(tokens[k]).lower()] = name
    return aliases


_CLAUSE_WORDS = frozenset({"WHERE", "GROUP", "ORDER", "LIMIT", "JOIN", "LEFT", "RIGHT", "INNER", "OUTER", "FULL",
                           "CROSS", "USING", "ON", "UNION", "HAVING", "WINDOW", "QUALIFY", "NATURAL", "OFFSET"})


def _resolve(column: str | None, aliases: dict[str, str]) -> str | None:
    if column and "." in column:
        qualifier, _, name = column.rpartition(".")
        if qualifier in aliases:
            return f"{aliases[qualifier]}.{name}"
    return column


def _sql_context(tokens: list[_Tok], i: int) -> tuple[str | None, str | None, str | None]:
    prev = tokens[i - 1] if i > 0 else None
    if prev is None:
        return None, None, None
    if prev.kind == "word" and prev.upper in _KEYWORDS:
        return None, None, _KEYWORDS[prev.upper]
    if prev.text == "(" and i > 1 and tokens[i - 2].upper == "INTERVAL":
        return None, None, "interval"
    if _compare(prev):
        return _identifier_before(tokens, i - 1), _COMPARE[prev.upper], None
    if prev.text in ("(", ","):  # IN ( 'a', 'b' )
        j = i - 1
        while j > 0 and (tokens[j].text == "," or tokens[j].kind in ("string", "number")):
            j -= 1
        if tokens[j].text == "(" and j > 0 and tokens[j - 1].upper == "IN":
            return _identifier_before(tokens, j - 1), "in", None
    if prev.upper == "BETWEEN":
        return _identifier_before(tokens, i - 1), "between", None
    if prev.upper == "AND" and i > 2 and tokens[i - 3].upper == "BETWEEN":
        return _identifier_before(tokens, i - 3), "between", None
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and _compare(nxt) and i + 2 < len(tokens):
        column = _identifier_after(tokens, i + 2)
        if column:
            return column, _COMPARE[nxt.upper], None
    return None, None, None


def _compare(token: _Tok) -> bool:
    if token.kind == "op":
        return token.text in _COMPARE
    return token.kind == "word" and token.upper in ("LIKE", "ILIKE")


def _is_name(token: _Tok) -> bool:
    return token.kind == "ident" or (token.kind == "word" and token.upper not in _NOT_COLUMNS)


def _name(token: _Tok) -> str:
    return token.text[1:-1].replace('""', '"') if token.kind == "ident" else token.text


def _identifier_before(tokens: list[_Tok], i: int) -> str | None:
    """The (dotted) column name ending just before token ``i``."""
    j = i - 1
    if j < 0 or not _is_name(tokens[j]):
        return None
    parts = [_name(tokens[j])]
    while j >= 2 and tokens[j - 1].text == "." and _is_name(tokens[j - 2]):
        parts.insert(0, _name(tokens[j - 2]))
        j -= 2
    return ".".join(parts).lower()


def _identifier_after(tokens: list[_Tok], i: int) -> str | None:
    if i >= len(tokens) or not _is_name(tokens[i]) or tokens[i].upper in _KEYWORDS:
        return None
    parts = [_name(tokens[i])]
    while i + 2 < len(tokens) and tokens[i + 1].text == "." and _is_name(tokens[i + 2]):
        parts.append(_name(tokens[i + 2]))
        i += 2
    if i + 1 < len(tokens) and tokens[i + 1].text == "(":
        return None  # a function call, not a column
    return ".".join(parts).lower()


# -- Python ------------------------------------------------------------------------------------


def _parameter_contexts(tree: ast.AST) -> dict[int, tuple[str | None, str | None]]:
    """``ehr.sql("... WHERE subject_id = ?", [10002428])``: each parameter gets the
    column and comparison of its ``?`` (by position). Keyed by the parameter node's id."""
    out: dict[int, tuple[str | None, str | None]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql"
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and isinstance(node.args[1], (ast.List, ast.Tuple))):
            continue
        tokens = sql_tokens(node.args[0].value)
        marks = [i for i, t in enumerate(tokens) if t.text == "?"]
        aliases = _aliases(tokens)
        for mark, element in zip(marks, node.args[1].elts):
            column, op, _ = _sql_context(tokens, mark)
            column = _resolve(column, aliases)
            target = element.operand if isinstance(element, ast.UnaryOp) else element
            out[id(target)] = (column, op)
    return out


def _python_context(node: ast.AST, parents: dict[int, ast.AST], params: dict | None = None) -> dict:
    """Column / keyword context of a Python constant: ``pl.col('drug') == 'x'``,
    ``ehr.lookup('d_labitems', 'label', 'x')``, ``ago(months=3)``, an SQL parameter."""
    context: dict = {}
    target = node.operand if isinstance(node, ast.UnaryOp) else node
    if params and id(target) in params:
        column, op = params[id(target)]
        if column:
            context["column"], context["op"] = column, op
        return context
    parent = parents.get(id(node))
    if isinstance(parent, ast.keyword):
        context["keyword"] = parent.arg
    elif isinstance(parent, ast.Compare):
        other = parent.left if parent.left is not node else (parent.comparators[0] if parent.comparators else None)
        name = _column_of(other)
        if name:
            context["column"] = name.lower()
            context["op"] = "="
    elif isinstance(parent, (ast.List, ast.Tuple, ast.Set)):
        grand = parents.get(id(parent))
        if isinstance(grand, ast.Call) and isinstance(grand.func, ast.Attribute) and grand.func.attr == "is_in":
            name = _column_of(grand.func.value)
            if name:
                context["column"], context["op"] = name.lower(), "in"
    if isinstance(parent, ast.Call):
        strings = tuple(a.value for a in parent.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                        and a is not node)
        if strings:
            context["context_strings"] = strings
    return context


def _column_of(node: ast.AST | None) -> str | None:
    """``pl.col('x')`` or ``df['x']`` -> 'x'."""
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "col"):
        return node.args[0].value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _line_offsets(code: str) -> list[int]:
    offsets, total = [0], 0
    for line in code.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def _span(node: ast.expr, code: str, offsets: list[int]) -> tuple[int, int] | None:
    """Character span of a node (ast columns are UTF-8 byte offsets)."""
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    start = _char_offset(code, offsets, node.lineno, node.col_offset)
    end = _char_offset(code, offsets, node.end_lineno, node.end_col_offset)
    return (start, end) if start is not None and end is not None else None


def _char_offset(code: str, offsets: list[int], line: int, byte_col: int) -> int | None:
    if line - 1 >= len(offsets):
        return None
    start = offsets[line - 1]
    end = offsets[line] if line < len(offsets) else len(code)
    text = code[start:end]
    prefix = text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore")
    return start + len(prefix)


def _string_body(source: str) -> tuple[int, int, str] | None:
    """``(start, end, body)`` of a plain Python string literal's content (no prefix but r)."""
    match = re.match(r"^([rRuU]?)('''|\"\"\"|'|\")", source)
    if not match or not source.endswith(match.group(2)):
        return None
    begin = match.end()
    end = len(source) - len(match.group(2))
    if end < begin:
        return None
    return begin, end, source[begin:end]


def _python_quote(source: str) -> str | None:
    match = re.match(r"^('''|\"\"\"|'|\")", source)
    return match.group(1) if match and source.endswith(match.group(1)) and len(source) >= 2 * len(match.group(1)) \
        else None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_text(value: int | float) -> str:
    return repr(value)


def sql_strings(code: str) -> list[str]:
    """The SQL strings of a cell's code."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_HINT.search(node.value)]


def code_words(code: str) -> frozenset[str]:
    """The names the code uses, lower-case: SQL identifiers and keywords (not function
    names), constant string values, Python names and attributes. What the question's
    words are checked against."""
    return _code_words(code)


@functools.lru_cache(maxsize=8192)
def _code_words(code: str) -> frozenset[str]:
    code = _PLACEHOLDER.sub("NULL", code)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return frozenset()
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SQL_HINT.search(node.value):
                tokens = sql_tokens(node.value)
                for i, token in enumerate(tokens):
                    if token.kind in ("word", "ident") and not _is_call(tokens, i):
                        words.add(_name(token).lower())
                    elif token.kind == "string":
                        words.add(token.text[1:-1].replace("''", "'").lower())
            else:
                words.add(node.value.lower())
        elif isinstance(node, ast.Name):
            words.add(node.id.lower())
        elif isinstance(node, ast.Attribute):
            words.add(node.attr.lower())
    return frozenset(w for w in words if w and not w.startswith("\u27e6"))


def selected_words(code: str) -> frozenset[str]:
    """Names in the outermost SELECT list of each SQL string of the code (what is returned)."""
    return _selected_words(code)


@functools.lru_cache(maxsize=8192)
def _selected_words(code: str) -> frozenset[str]:
    code = _PLACEHOLDER.sub("NULL", code)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return frozenset()
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_HINT.search(node.value):
            depth, inside = 0, False
            tokens = sql_tokens(node.value)
            for i, token in enumerate(tokens):
                if token.text == "(":
                    depth += 1
                elif token.text == ")":
                    depth -= 1
                elif depth == 0 and token.upper == "SELECT" and not inside:
                    inside = True
                elif depth == 0 and token.upper == "FROM" and inside:
                    break
                elif inside and token.kind in ("word", "ident") and not _is_call(tokens, i):
                    words.add(_name(token).lower())
    return frozenset(words)


def _is_call(tokens: list[_Tok], i: int) -> bool:
    """A function name (followed by a parenthesis): functions say how, not what."""
    return i + 1 < len(tokens) and tokens[i + 1].text == "("
