"""User skills: an accepted cell turned into a reusable, versioned, tested function.

``save_skill("lactate_peak", code, card={...}, params={"subject_id": 10000032}, tests=[...])``
replaces the literal ``10000032`` in the cell's code by a parameter ``subject_id`` (via
``ast``), and stores the code, its card and its accepted test cases in a SQLite file beside
the memory store (``<data dir>/skills.sqlite``). Saving the same name again adds a version;
old versions are kept. ``get("lactate_peak")(ehr, subject_id=10000040)`` runs the code
through the agent's executor with the parameters as variables, returning ``answer`` (or
the value of the last expression).
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect
import json
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ehr_magic import migrations
from ehr_magic.knowledge.handle import Database
from ehr_magic.paths import data_dir
from ehr_magic.skills.cards import Card
from ehr_magic.skills.errors import SkillError

APPLICATION_ID = 0x45484D53  # "EHMS"
SQLITE_MAGIC = b"SQLite format 3\x00"
MIGRATIONS: list[migrations.Step] = [migrations.script(sql) for sql in [
    # 1: every version of every user skill
    """
    CREATE TABLE skills_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE user_skills (
        name        TEXT NOT NULL,
        version     INTEGER NOT NULL,
        code        TEXT NOT NULL,
        source_code TEXT NOT NULL,
        params      TEXT NOT NULL,
        card        TEXT NOT NULL,
        tests       TEXT NOT NULL,
        schema      TEXT,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (name, version)
    );
    INSERT INTO skills_meta (key, value) VALUES ('format', 'ehr-magic-skills');
    """,
]]
_LITERAL_NODES = (ast.Constant, ast.UnaryOp, ast.List, ast.Tuple, ast.Set, ast.Dict)


def default_path() -> Path:
    return data_dir() / "skills.sqlite"


# -- turning code into a function --------------------------------------------------------------

def find_literals(code: str) -> list[dict[str, Any]]:
    """The literal values of ``code`` (numbers, strings, lists...) with their line, as candidates
    for parameters (outermost literals only; docstrings left out). Numbers and quoted
    words inside strings (e.g. ids in SQL text) are listed too, with ``in_string=True``."""
    tree = _parse(code)
    found: list[dict[str, Any]] = []

    def visit(node: ast.AST) -> None:
        value = _literal(node)
        if value is not _NO and isinstance(node, ast.expr):  # literals are expressions, which carry a position
            found.append({"value": value, "line": node.lineno, "col": node.col_offset, "in_string": False})
            if isinstance(value, str):
                for inner in _inner_literals(value):
                    found.append({"value": inner, "line": node.lineno, "col": node.col_offset, "in_string": True})
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue
        visit(stmt)
    return found


def _inner_literals(text: str) -> list[Any]:
    values: list[Any] = []
    for match in re.finditer(r"'([^'{}]+)'|(?<![\w.])(-?\d+(?:\.\d+)?)(?![\w.])", text):
        if match.group(1) is not None:
            values.append(match.group(1))
        else:
            number = match.group(2)
            values.append(float(number) if "." in number else int(number))
    return values


def _embedded(value: Any) -> re.Pattern[str] | None:
    """Where ``value`` appears inside a string: a whole number, or a whole quoted word."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or value == "":
        return None
    if isinstance(value, str):
        return re.compile(r"(?<=')" + re.escape(value) + r"(?=')")
    return re.compile(r"(?<![\w.])" + re.escape(repr(value)) + r"(?![\w.])")


def parametrize(code: str, params: dict[str, Any]) -> str:
    """``code`` with every literal equal to ``params[name]`` replaced by the variable ``name``."""
    tree = _parse(code)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for name in params:
        if not name.isidentifier() or name in {"ehr", "skills", "pl", "answer"} or name.startswith("_"):
            raise SkillError(f"Parameter name {name!r} is not allowed; use a plain identifier like subject_id.")
        if name in used:
            raise SkillError(f"The code already uses the name {name!r}; choose another parameter name.")
    counts = dict.fromkeys(params, 0)

    class Replace(ast.NodeTransformer):
        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
            parts: list[ast.expr] = []
            for part in node.values:
                match = _match(part, params) if isinstance(part, ast.Constant) else None
                if match is not None:
                    counts[match] += 1
                    parts.append(ast.FormattedValue(ast.Name(match, ast.Load()), -1, None))
                else:
                    parts.append(self.visit(part))
            node.values = parts
            return node

        def generic_visit(self, node: ast.AST) -> ast.AST:
            if isinstance(node, _LITERAL_NODES):
                match = _match(node, params)
                if match is not None:
                    counts[match] += 1
                    return ast.copy_location(ast.Name(match, ast.Load()), node)
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    parts = _split(node.value)
                    if parts is not None:
                        return ast.copy_location(ast.JoinedStr(parts), node)
            return super().generic_visit(node)

    patterns = {name: p for name, value in params.items() if (p := _embedded(value)) is not None}

    def _split(text: str) -> list[ast.expr] | None:
        """``text`` as f-string parts with embedded parameter values replaced (None if none is)."""
        hits = sorted((m.start(), m.end(), name) for name, p in patterns.items() for m in p.finditer(text))
        if not hits:
            return None
        parts: list[ast.expr] = []
        pos = 0
        for start, end, name in hits:
            if start < pos:
                continue
            if start > pos:
                parts.append(ast.Constant(text[pos:start]))
            parts.append(ast.FormattedValue(ast.Name(name, ast.Load()), -1, None))
            counts[name] += 1
            pos = end
        if pos < len(text):
            parts.append(ast.Constant(text[pos:]))
        return parts

    tree = Replace().visit(tree)
    missing = [f"{n}={params[n]!r}" for n, c in counts.items() if c == 0]
    if missing:
        raise SkillError(f"Literal(s) {', '.join(missing)} do not appear in the code; pick values that do "
                         "(see find_literals).")
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


_NO = object()


def _literal(node: ast.AST) -> Any:
    if not isinstance(node, _LITERAL_NODES):
        return _NO
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO


def _match(node: ast.AST, params: dict[str, Any]) -> str | None:
    value = _literal(node)
    if value is _NO:
        return None
    for name, wanted in params.items():
        if type(value) is type(wanted) and value == wanted:
            return name
    return None


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise SkillError(f"The code is not valid Python (line {exc.lineno}: {exc.msg}).") from None


# -- the store -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class UserSkill:
    name: str
    version: int
    code: str  # parametrized
    source_code: str  # as accepted
    params: dict[str, Any]
    card: Card
    tests: list[dict[str, Any]] = field(default_factory=list)
    schema: str | None = None
    created_at: str = ""


def _connect(path: str | os.PathLike[str] | None, *, create: bool) -> sqlite3.Connection | None:
    file = Path(path).expanduser() if path is not None else default_path()
    if not file.exists():
        if not create:
            return None
        file.parent.mkdir(parents=True, exist_ok=True)
    elif file.stat().st_size > 0:
        with file.open("rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise SkillError(f"{file} is not a SQLite file, so it cannot be a skill store; give another path.")
    conn = sqlite3.connect(str(file), timeout=30, isolation_level=None)
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
        conn.close()
        raise SkillError(f"{file} is a SQLite database but not an ehr-magic skill store; give another path.")
    if version > len(MIGRATIONS):
        conn.close()
        raise SkillError(f"The skill store {file} was written by a newer ehr-magic; upgrade ehr-magic.")
    try:
        migrations.apply(conn, MIGRATIONS, application_id=APPLICATION_ID)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_name(name: str) -> None:
    from ehr_magic.skills.registry import builtin

    if not name.isidentifier() or not name.islower():
        raise SkillError(f"Skill name {name!r} must be a lower-case identifier like lactate_peak.")
    if name in builtin() or name in {"calc", "search", "card", "names"}:
        raise SkillError(f"{name!r} is a built-in skill name; choose another name.")


def save_skill(name: str, code: str, *, card: dict[str, Any], params: dict[str, Any], tests: list[dict[str, Any]],
               path: str | os.PathLike[str] | None = None, schema: str | None = None,
               verify_with: Any = None) -> Card:
    """Save ``code`` as user skill ``name`` (a new version if it exists) and return its card.

    ``params`` maps parameter names to the literal they replace (its default); ``tests``
    are the accepted cases, ``{"params": {...}, "expected": value}``. With ``verify_with``
    (an EHR), the tests must pass on it before anything is saved.
    """
    _check_name(name)
    for i, test in enumerate(tests):
        if not isinstance(test, dict) or "expected" not in test:
            raise SkillError(f"Test {i + 1} needs an 'expected' value: {{'params': {{...}}, 'expected': ...}}.")
        unknown = set(test.get("params", {})) - set(params)
        if unknown:
            raise SkillError(f"Test {i + 1} sets unknown parameter(s) {sorted(unknown)}.")
    body = parametrize(code, params)
    conn = _connect(path, create=True)
    assert conn is not None
    try:
        version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM user_skills WHERE name = ?",
                               (name,)).fetchone()[0]
        skill = UserSkill(name, version, body, code, dict(params),
                          _card(name, version, card, params, body, tests, schema), list(tests), schema,
                          dt.datetime.now().isoformat(timespec="seconds"))
        if verify_with is not None:
            failures = [r for r in _run_tests(skill, verify_with) if not r["ok"]]
            if failures:
                raise SkillError(f"Skill {name} not saved: {len(failures)} test(s) fail: "
                                 + "; ".join(r["problem"] for r in failures[:3]))
        conn.execute(
            "INSERT INTO user_skills (name, version, code, source_code, params, card, tests, schema, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (name, version, body, code, json.dumps({k: repr(v) for k, v in params.items()}),
             json.dumps(card), json.dumps(tests, default=str), schema, skill.created_at))
    finally:
        conn.close()
    return skill.card


def _card(name: str, version: int, card: dict[str, Any], params: dict[str, Any], code: str,
          tests: list[dict[str, Any]], schema: str | None) -> Card:
    values = {k: v for k, v in card.items() if k not in {"name", "kind", "version", "signature", "extra"}}
    values.setdefault("title", name.replace("_", " "))
    signature = "(ehr, *" + "".join(f", {k}={v!r}" for k, v in params.items()) + ")" if params else "(ehr)"
    return Card.from_dict({
        **values, "name": name, "kind": "user", "version": version, "signature": signature,
        "schemas": (schema,) if schema else (), "level": values.get("level", ""),
        "extra": {"params": dict(params), "code": code, "tests": list(tests)},
    })


def _rows(conn: sqlite3.Connection, where: str, args: tuple[Any, ...]) -> list[UserSkill]:
    out = []
    for name, version, code, source, params, card, tests, schema, created in conn.execute(
            f"SELECT name, version, code, source_code, params, card, tests, schema, created_at FROM user_skills "
            f"WHERE {where} ORDER BY name, version", args):
        values = {k: ast.literal_eval(v) for k, v in json.loads(params).items()}
        test_list = json.loads(tests)
        out.append(UserSkill(name, version, code, source, values,
                             _card(name, version, json.loads(card), values, code, test_list, schema), test_list,
                             schema, created))
    return out


def user_skill(name: str, *, version: int | None = None,
               path: str | os.PathLike[str] | None = None) -> UserSkill | None:
    """A stored user skill (its latest version unless ``version``), or None."""
    conn = _connect(path, create=False)
    if conn is None:
        return None
    try:
        rows = _rows(conn, "name = ?" + (" AND version = ?" if version is not None else ""),
                     (name,) if version is None else (name, version))
    finally:
        conn.close()
    return rows[-1] if rows else None


def list_user_skills(*, path: str | os.PathLike[str] | None = None, all_versions: bool = False) -> list[Card]:
    """Cards of the saved user skills (latest version of each, unless ``all_versions``)."""
    conn = _connect(path, create=False)
    if conn is None:
        return []
    try:
        rows = _rows(conn, "TRUE", ())
    finally:
        conn.close()
    if all_versions:
        return [r.card for r in rows]
    latest: dict[str, UserSkill] = {}
    for r in rows:
        latest[r.name] = r
    return [r.card for r in latest.values()]


def get_user_card(name: str, *, version: int | None = None, path: str | os.PathLike[str] | None = None) -> Card | None:
    found = user_skill(name, version=version, path=path)
    return found.card if found else None


def delete_skill(name: str, *, version: int | None = None, path: str | os.PathLike[str] | None = None) -> int:
    """Delete a user skill (every version, or one); returns how many versions were deleted."""
    conn = _connect(path, create=False)
    if conn is None:
        raise SkillError(f"No user skill named {name!r} (no skill store yet).")
    try:
        cur = conn.execute("DELETE FROM user_skills WHERE name = ?" + (" AND version = ?" if version else ""),
                           (name,) if version is None else (name, version))
        deleted = cur.rowcount
    finally:
        conn.close()
    if not deleted:
        raise SkillError(f"No user skill named {name!r}" + (f" with version {version}" if version else "") + ".")
    return deleted


# -- running ---------------------------------------------------------------------------------------

def load_skill(name: str, *, version: int | None = None, path: str | os.PathLike[str] | None = None,
               missing_ok: bool = False) -> Callable[..., Any] | None:
    """The callable of a user skill: ``fn(ehr, **params)``."""
    found = user_skill(name, version=version, path=path)
    if found is None:
        if missing_ok:
            return None
        raise SkillError(f"No user skill named {name!r}.")
    return _callable(found, path)


def _callable(skill: UserSkill, path: str | os.PathLike[str] | None = None,
              timeout: float = 120.0) -> Callable[..., Any]:
    def run(ehr: Database, **kwargs: Any) -> Any:
        unknown = set(kwargs) - set(skill.params)
        if unknown:
            raise SkillError(f"{skill.name} has no parameter(s) {sorted(unknown)}; its parameters: "
                             f"{', '.join(skill.params) or 'none'}.")
        from ehr_magic.runtime.executor import Executor, base_namespace
        from ehr_magic.skills import namespace

        names = base_namespace(ehr)
        names.update(namespace(ehr, path=path))
        names.update({**skill.params, **kwargs})
        result = Executor(ehr, timeout=timeout).run(skill.code, names)
        if not result.ok:
            why = result.error.describe() if result.error is not None else "unknown error"
            raise SkillError(f"User skill {skill.name} (v{skill.version}) failed: {why}")
        return result.answer if result.has_answer else result.last_value

    params = [inspect.Parameter("ehr", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in skill.params.items()]
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__name__ = skill.name
    run.__doc__ = skill.card.purpose
    run.card = skill.card  # type: ignore[attr-defined]
    return run


def run_tests(name: str, ehr: Database, *, version: int | None = None,
              path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Run a user skill's saved test cases on ``ehr``: ``[{"params", "ok", "problem"}]``."""
    found = user_skill(name, version=version, path=path)
    if found is None:
        raise SkillError(f"No user skill named {name!r}.")
    return _run_tests(found, ehr, path)


def _run_tests(skill: UserSkill, ehr: Database, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    import polars as pl

    from ehr_magic.skills.testing import check

    fn = _callable(skill, path)
    results = []
    for test in skill.tests:
        params = test.get("params", {})
        try:
            value = fn(ehr, **params)
        except SkillError as exc:
            results.append({"params": params, "ok": False, "problem": str(exc)})
            continue
        expected = test["expected"]
        if not isinstance(expected, (dict, list)):
            if isinstance(value, pl.DataFrame) and value.shape == (1, 1):
                value = value.item()
            elif isinstance(value, pl.Series) and value.len() == 1:
                value = value.item()
            expected = {"value": expected}
        problems = check(value, expected)
        results.append({"params": params, "ok": not problems, "problem": "; ".join(problems)})
    return results
