"""Is this SQL a read? Classifying statements with sqlglot's DuckDB tokenizer and parser.

Generated code may only read: ``SELECT``, ``WITH`` (a query), ``VALUES``, ``FROM``-first
queries, ``PIVOT``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE`` and ``EXPLAIN`` of those. Every
other statement (``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``PRAGMA``, ``SET``,
``CREATE``, ``INSERT``, ...) is refused, and so is reading files from a query
(``read_csv(...)``, ``FROM '/etc/passwd'``, ``glob``, ``sqlite_scan``...).

``check_sql(text, strict=True)`` is for text known to be SQL (the argument of
``ehr.sql``): anything that is not a recognisably safe read is a problem, including
text sqlglot cannot parse. ``strict=False`` is for any other string in the code: it
reports only what clearly is a forbidden statement, so a printed label such as
``"Set of patients"`` is not mistaken for ``SET``.

``ensure_read_only(text)`` raises ``BlockedSQLError``. Within ``generated_code()`` (the
executor's run of model-written code, in its thread), ``check_generated(text)`` applies it
to every query ``EHR.sql`` receives: SQL built at run time (an f-string filling in a column
name found by earlier code) is judged on the text it actually runs, with the same rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from ehr_magic.errors import ReadOnlyError, sentences
from ehr_magic.safety import limits

READ_STATEMENTS = ("SELECT", "WITH", "VALUES", "DESCRIBE", "SHOW", "EXPLAIN")
_READ_START = {"SELECT", "WITH", "VALUES", "FROM", "TABLE", "PIVOT", "UNPIVOT", "PIVOT_WIDER", "PIVOT_LONGER"}
_INSPECT_START = {"DESCRIBE", "DESC", "SHOW", "SUMMARIZE"}

# Why each kind of statement is refused (the reason completes "... is not allowed: <reason>").
_WHY = {
    "COPY": "COPY reads or writes files",
    "EXPORT": "EXPORT writes files", "IMPORT": "IMPORT reads files",
    "ATTACH": "ATTACH opens another database", "DETACH": "DETACH changes the attached databases",
    "USE": "USE switches the database",
    "INSTALL": "INSTALL downloads extensions", "LOAD": "LOAD loads extensions",
    "FORCE": "it installs or loads extensions",
    "UPDATE EXTENSIONS": "it downloads extensions",
    "PRAGMA": "PRAGMA changes or inspects engine settings", "SET": "SET changes engine settings",
    "RESET": "RESET changes engine settings", "CALL": "CALL runs a procedure",
    "CREATE": "CREATE changes the database", "INSERT": "INSERT changes the database",
    "UPDATE": "UPDATE changes the database", "DELETE": "DELETE changes the database",
    "DROP": "DROP changes the database", "ALTER": "ALTER changes the database",
    "TRUNCATE": "TRUNCATE changes the database", "MERGE": "MERGE changes the database",
    "UPSERT": "it changes the database", "REPLACE": "it changes the database",
    "COMMENT": "COMMENT changes the database", "GRANT": "GRANT changes permissions",
    "REVOKE": "REVOKE changes permissions",
    "CHECKPOINT": "CHECKPOINT writes the database file", "VACUUM": "VACUUM writes the database file",
    "ANALYZE": "ANALYZE updates statistics in the database",
    "BEGIN": "transactions are not needed for reading", "START": "transactions are not needed for reading",
    "COMMIT": "transactions are not needed for reading", "ROLLBACK": "transactions are not needed for reading",
    "ABORT": "transactions are not needed for reading", "END": "transactions are not needed for reading",
    "PREPARE": "prepared statements hide what runs", "EXECUTE": "prepared statements hide what runs",
    "DEALLOCATE": "prepared statements hide what runs",
}
_ONLY_READS = "use read queries only (SELECT, WITH, VALUES, DESCRIBE, SHOW, EXPLAIN)"

_EXTENSIONS = (r"(httpfs|https?|s3|sqlite|sqlite3|sqlite_scanner|postgres|postgres_scanner|mysql|mysql_scanner|json|"
               r"parquet|icu|fts|spatial|excel|aws|azure|iceberg|delta|tpch|tpcds|inet|substrait|arrow|vss|motherduck|"
               r"md|ducklake|ui|shellfs|httpserver|h3|prql|\w+_scanner|\w+_extension)")
# A non-SQL string is reported only when it has the shape of a real forbidden statement.
_TIGHT = {
    "COPY": r"COPY\s+(\(.*\)|[\w.\"]+)\s+(TO|FROM)\s+\S",
    "EXPORT": r"EXPORT\s+DATABASE\b", "IMPORT": r"IMPORT\s+DATABASE\b",
    "ATTACH": r"ATTACH\s+(DATABASE\s+)?(IF\s+NOT\s+EXISTS\s+)?(['\"]|\S+\s+AS\s+\w)",
    "DETACH": r"DETACH\s+(DATABASE\s+)?(IF\s+EXISTS\s+)?[\w\"]+\s*;?\s*$",
    "USE": r"USE\s+[\w\"]+(\.[\w\"]+)?\s*;?\s*$",
    "INSTALL": r"INSTALL\s+(['\"][^'\"]+['\"]|\S*[./:]\S*|" + _EXTENSIONS + r")(\s+FROM\s+\S+)?\s*;?\s*$",
    "LOAD": r"LOAD\s+(['\"][^'\"]+['\"]|\S*[./:]\S*|" + _EXTENSIONS + r")\s*;?\s*$",
    "FORCE": r"FORCE\s+(INSTALL|LOAD|CHECKPOINT)\b",
    "UPDATE EXTENSIONS": r"UPDATE\s+EXTENSIONS\b",
    "PRAGMA": r"PRAGMA\s+\w+\s*(=|\(|;|$)",
    "SET": r"SET\s+(GLOBAL\s+|SESSION\s+|LOCAL\s+|VARIABLE\s+)?\w+\s*(=|TO\s)",
    "RESET": r"RESET\s+(GLOBAL\s+|SESSION\s+|LOCAL\s+|VARIABLE\s+)?\w+\s*;?\s*$",
    "CALL": r"CALL\s+\w+\s*\(",
    "CREATE": r"CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+|PERSISTENT\s+)?(UNIQUE\s+)?"
              r"(TABLE|VIEW|MACRO|FUNCTION|SEQUENCE|SCHEMA|INDEX|TYPE|SECRET|DATABASE)\b",
    "INSERT": r"INSERT\s+(OR\s+\w+\s+)?INTO\b", "UPSERT": r"UPSERT\s+INTO\b", "REPLACE": r"REPLACE\s+INTO\b",
    "UPDATE": r"UPDATE\s+[\w.\"]+\s+SET\b", "DELETE": r"DELETE\s+FROM\b",
    "DROP": r"DROP\s+(TABLE|VIEW|MACRO|FUNCTION|SEQUENCE|SCHEMA|INDEX|TYPE|SECRET|DATABASE)\b",
    "ALTER": r"ALTER\s+(TABLE|VIEW|SEQUENCE|DATABASE|SCHEMA)\b",
    "TRUNCATE": r"TRUNCATE\s+(TABLE\s+)?[\w.\"]+\s*;?\s*$", "MERGE": r"MERGE\s+INTO\b",
    "COMMENT": r"COMMENT\s+ON\b", "GRANT": r"GRANT\s+\w+.*\bON\b", "REVOKE": r"REVOKE\s+\w+.*\bON\b",
    "CHECKPOINT": r"CHECKPOINT\s*(\w+)?\s*;?\s*$", "VACUUM": r"VACUUM(\s+ANALYZE)?(\s+[\w\"]+)?\s*;?\s*$",
    "ANALYZE": r"ANALYZE(\s+[\w\"]+)?\s*;?\s*$",
    "BEGIN": r"BEGIN(\s+TRANSACTION)?\s*;?\s*$", "START": r"START\s+TRANSACTION\b",
    "COMMIT": r"COMMIT\s*;?\s*$", "ROLLBACK": r"ROLLBACK\s*;?\s*$", "ABORT": r"ABORT\s*;?\s*$",
    "PREPARE": r"PREPARE\s+\w+\s+AS\b", "EXECUTE": r"EXECUTE\s+\w+\s*(\(|;|$)", "DEALLOCATE": r"DEALLOCATE\s+\w+",
}
_TIGHT_RE = {key: re.compile(pattern, re.IGNORECASE | re.DOTALL) for key, pattern in _TIGHT.items()}
_KEYWORDS = _READ_START | _INSPECT_START | {"EXPLAIN"} | {k.split()[0] for k in _WHY}
_FIRST_WORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z_]+)", re.DOTALL)

# Table functions (and scalar functions) that reach outside the database.
_FILE_FUNCTIONS = {
    "glob", "sqlite_scan", "sqlite_attach", "postgres_scan", "postgres_scan_pushdown", "postgres_attach",
    "postgres_query", "postgres_execute", "mysql_scan", "mysql_query", "mysql_execute", "iceberg_scan",
    "iceberg_metadata", "iceberg_snapshots", "delta_scan", "parquet_scan", "parquet_metadata", "parquet_schema",
    "parquet_file_metadata", "parquet_kv_metadata", "parquet_bloom_probe", "sniff_csv", "st_read", "st_read_meta",
    "query", "query_table", "duckdb_secrets", "which_secret", "getenv", "load_aws_credentials", "arrow_scan",
    "pandas_scan", "python_map_function", "read_file", "list_files", "ducklake_attach", "iceberg_attach",
    "http_get", "http_post", "uc_scan", "azure_scan",
}
_FILE_FUNCTION_PATTERN = re.compile(r"^(read_\w+|\w+_scan|\w+_attach|\w+_query|\w+_execute|scan_\w+)$", re.IGNORECASE)
_PATHLIKE = re.compile(r"[/\\~]|^\w+://|\.(csv|tsv|txt|parquet|json|jsonl|ndjson|xlsx?|db|duckdb|sqlite|arrow|ipc|gz|"
                       r"zst)$", re.IGNORECASE)


@dataclass(frozen=True)
class SqlProblem:
    """Why one SQL text is refused. ``statement`` is the offending statement (shortened)."""

    kind: str  # "statement" | "file" | "unparsable" | "into"
    statement: str
    reason: str

    def message(self) -> str:
        return f"`{self.statement}` is not allowed: {self.reason}"


class BlockedSQLError(ReadOnlyError):
    """SQL from generated code that is not a read (raised by ``ensure_read_only``)."""


def looks_like_sql(text: str) -> bool:
    """Whether ``text`` starts like an SQL statement (``SELECT ...``, ``COPY ...``)."""
    match = _FIRST_WORD.match(text)
    if match is None:
        return False
    word = match.group(1).upper()
    if word in ("CHECKPOINT", "VACUUM", "COMMIT", "ROLLBACK", "ABORT"):  # statements of one word
        return True
    return word in _KEYWORDS and len(text.split()) >= 2


def check_sql(text: str, *, strict: bool = True) -> list[SqlProblem]:
    """Problems with SQL ``text`` (empty list: a read). See the module docstring for ``strict``."""
    return list(_check_cached(text, strict))


def ensure_read_only(text: str) -> None:
    """Raise ``BlockedSQLError`` unless ``text`` is a read query that stays inside the database."""
    problems = check_sql(text, strict=True)
    if problems:
        raise BlockedSQLError(f"This query was blocked for safety: {problems[0].message()}.")


def generated_code() -> AbstractContextManager[None]:
    """Within this block (in this thread), ``check_generated`` checks every query; the
    analyst's own cells, which run outside it, are left alone."""
    return limits.in_this_thread("generated_code", True)


def check_generated(text: str) -> None:
    """``ensure_read_only(text)`` when model-written code is running in this thread."""
    if limits.this_thread("generated_code"):
        ensure_read_only(text)


def statement_kind(text: str) -> str:
    """The first keyword of a statement in upper case (``SELECT``, ``COPY``...), or ``""``."""
    match = _FIRST_WORD.match(text)
    return match.group(1).upper() if match else ""


# What sqlglot raises for SQL it cannot read: its own errors, and on some malformed text an
# AttributeError from inside its parser (a struct literal such as `{: 1}`). Either way the
# text cannot be read here, and DuckDB's own parser decides (strict mode).
_UNREADABLE = (SqlglotError, AttributeError)


@lru_cache(maxsize=2048)
def _check_cached(text: str, strict: bool) -> tuple[SqlProblem, ...]:
    if not strict and not looks_like_sql(text):
        return ()
    try:
        tokens = list(Dialect.get_or_raise("duckdb").tokenize(text))
    except SqlglotError:  # the tokenizer's TokenError: unbalanced quotes and the like
        if strict:
            return (SqlProblem("unparsable", _short(text), "the guard cannot read this SQL (unbalanced quotes or "
                               "unknown syntax); write one plain SELECT query"),)
        return ()
    statements = _split(text, tokens)
    problems: list[SqlProblem] = []
    kinds = [statement_kind(s_text) for s_text, _ in statements]
    several = len(statements) > 1
    for (s_text, s_tokens), kind in zip(statements, kinds):
        problems += _check_statement(s_text, s_tokens, kind, strict=strict or several)
    return tuple(problems)


def _split(text: str, tokens: list[Token]) -> list[tuple[str, list[Token]]]:
    statements: list[list[Token]] = []
    current: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if current:
                statements.append(current)
            current = []
        else:
            current.append(token)
    if current:
        statements.append(current)
    return [(text[s[0].start: s[-1].end + 1], s) for s in statements]


def _check_statement(text: str, tokens: list[Token], kind: str, *, strict: bool) -> list[SqlProblem]:
    problems = _outside_access(text, tokens)
    if kind == "EXPLAIN":
        rest = re.sub(r"^\s*EXPLAIN(\s+ANALY[SZ]E)?\s*", "", text, flags=re.IGNORECASE)
        rest_kind = statement_kind(rest)
        if rest_kind in _READ_START or rest_kind in _INSPECT_START:
            return problems + [p for p in _check_read(rest, strict) if p not in problems]
        return problems + [SqlProblem("statement", _short(text), f"EXPLAIN of anything but a query; {_ONLY_READS}")]
    if kind in _INSPECT_START:
        rest = re.sub(r"^\s*\w+\s*", "", text)
        if statement_kind(rest) in _READ_START or rest.lstrip().startswith("("):
            problems += [p for p in _check_read(rest.strip().strip("()") if rest.lstrip().startswith("(") else rest,
                                                strict) if p not in problems]
        return problems
    if kind in _READ_START or text.lstrip().startswith("("):
        return problems + [p for p in _check_read(text, strict) if p not in problems]
    if re.match(r"^\s*_q\d+_", text):  # a statement whose start is not visible (a variable)
        return problems
    key = "UPDATE EXTENSIONS" if re.match(r"\s*UPDATE\s+EXTENSIONS\b", text, re.IGNORECASE) else kind
    if strict or (key in _TIGHT_RE and _TIGHT_RE[key].match(text.strip())):
        reason = _WHY.get(key, f"{key or 'this statement'} is not a read query")
        problems.append(SqlProblem("statement", _short(text), f"{reason}; {_ONLY_READS}"))
    return problems


def _check_read(text: str, strict: bool) -> list[SqlProblem]:
    """Parse a read statement; a parse that fails or is not a query is a problem in strict mode."""
    try:
        parsed = sqlglot.parse(text, read="duckdb")
    except _UNREADABLE:
        parsed = None
    if not parsed or any(p is None for p in parsed):
        # sqlglot lags DuckDB's grammar (e.g. `?::VARCHAR[]`): DuckDB's own parser decides.
        return _duckdb_read_check(text) if strict else []
    problems = []
    for statement in parsed:
        if isinstance(statement, exp.Command) or not isinstance(
                statement, (exp.Query, exp.Values, exp.Describe, exp.Show, exp.Pivot, exp.Summarize, exp.Subquery)):
            if strict:
                problems += [p for p in _duckdb_read_check(text) if p not in problems]
            continue
        if any(node.args.get("into") is not None for node in statement.find_all(exp.Select)):
            problems.append(SqlProblem("into", _short(text), f"SELECT ... INTO creates a table; {_ONLY_READS}"))
        for table in statement.find_all(exp.Table):
            name = table.this
            if isinstance(name, (exp.Identifier, exp.Literal)) and _PATHLIKE.search(str(name.this)):
                problems.append(SqlProblem("file", _short(text), f"the query reads the file {str(name.this)!r}; "
                                           "query the tables of the connected database"))
    return problems


def _duckdb_read_check(text: str) -> list[SqlProblem]:
    """DuckDB's own parser as the second opinion: one SELECT that touches no file.

    Only parses (``extract_statements``, ``json_serialize_sql`` on an empty in-memory
    database with external access off); nothing of ``text`` is executed.
    """
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        return [SqlProblem("unparsable", _short(text), f"DuckDB cannot parse it: {sentences(_first_line(exc))} Fix the "
                           "syntax or write a plain SELECT")]
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(s.type.name for s in statements) or "nothing"
        return [SqlProblem("statement", _short(text), f"DuckDB reads it as {kinds}; {_ONLY_READS}")]
    with duckdb.connect(":memory:", config={"enable_external_access": False}) as con:
        serialized = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [text]).fetchall()[0][0]
    tree = json.loads(serialized)
    if tree.get("error"):
        return [SqlProblem("unparsable", _short(text),
                           f"DuckDB cannot read it as a query ({tree.get('error_message', '')}); {_ONLY_READS}")]
    problems = []
    for node in _json_nodes(tree):
        function = str(node.get("function_name") or "").lower()
        if function and (function in _FILE_FUNCTIONS or _FILE_FUNCTION_PATTERN.match(function)):
            problems.append(SqlProblem("file", _short(text), f"the function {function}() reads files, other databases "
                                       "or the environment; query the tables of the connected database"))
        if node.get("type") == "BASE_TABLE" and _PATHLIKE.search(str(node.get("table_name", ""))):
            problems.append(SqlProblem("file", _short(text), f"the query reads the file {node['table_name']!r}; query "
                                       "the tables of the connected database"))
    return problems


def _json_nodes(value: object) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _json_nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _json_nodes(child)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def _outside_access(text: str, tokens: list[Token]) -> list[SqlProblem]:
    """Token-level: functions that read files or other databases, and FROM 'file'."""
    problems = []
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        name = token.text.lower()
        if following is not None and following.token_type == TokenType.L_PAREN and token.token_type != TokenType.STRING:
            if name in _FILE_FUNCTIONS or _FILE_FUNCTION_PATTERN.match(name):
                problems.append(SqlProblem("file", _short(text), f"the function {name}() reads files, other "
                                           "databases or the environment; query the tables of the connected database"))
        if token.token_type in (TokenType.FROM, TokenType.JOIN) and following is not None and (
                following.token_type == TokenType.STRING
                or following.token_type == TokenType.IDENTIFIER and _PATHLIKE.search(following.text)):
            problems.append(SqlProblem("file", _short(text), f"the query reads the file {following.text!r}; query the "
                                       "tables of the connected database"))
    return problems


def _short(text: str, limit: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
