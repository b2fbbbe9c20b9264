"""Regular expressions that cannot backtrack catastrophically, with the ``re`` API.

Python's ``re`` backtracks: ``re.match('(a+)+$', 'a' * 32 + 'b')`` runs for minutes in
C while holding the interpreter lock, so no time limit can stop it and the kernel
freezes. Generated code gets this module as ``re`` instead. It compiles patterns with
RE2 (``google-re2``), whose matching time is linear in the text. Patterns RE2 cannot
express (back-references, look-around) fall back to Python's engine only when their
structure cannot blow up (no repeated group that itself repeats or alternates);
otherwise they are refused with a message saying how to rewrite them.
"""

from __future__ import annotations

import functools
import re as _std
import sys
import types
from typing import Any

import re2

try:  # the parser behind re.compile; named sre_parse before Python 3.11
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

error = _std.error
_INLINE = ((_std.IGNORECASE, "i"), (_std.MULTILINE, "m"), (_std.DOTALL, "s"))
_RE2_FLAGS = _std.IGNORECASE | _std.MULTILINE | _std.DOTALL | _std.UNICODE
_REPEATS = (_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT)
_POSSESSIVE = getattr(_sre_constants, "POSSESSIVE_REPEAT", None)


class UnsafePatternError(error):
    """A pattern that only the backtracking engine can run, with a shape that can blow up."""


@functools.lru_cache(maxsize=512)
def compile(pattern: Any, flags: int = 0) -> Any:  # shadows the builtin, as the re API does
    """A compiled pattern: RE2 when it can express ``pattern``, else a vetted ``re`` pattern."""
    if isinstance(pattern, _std.Pattern):
        pattern, flags = pattern.pattern, pattern.flags | flags
    flags = int(flags)
    if not flags & ~_RE2_FLAGS:
        inline = "".join(letter for flag, letter in _INLINE if flags & flag)
        source = pattern if not inline else (f"(?{inline})" + pattern if isinstance(pattern, str)
                                             else f"(?{inline})".encode() + pattern)
        try:
            return re2.compile(source)
        except re2.error:
            pass  # syntax RE2 lacks: consider Python's engine below
    compiled = _std.compile(pattern, flags)
    problem = backtracking_risk(pattern, flags)
    if problem:
        raise UnsafePatternError(
            f"the pattern {pattern!r} needs Python's backtracking regex engine and {problem}, which can take "
            "minutes on a short text; remove the nested repetition (e.g. '(a+)+' -> 'a+') or the back-reference")
    return compiled


def backtracking_risk(pattern: str | bytes, flags: int = 0) -> str:
    """Why ``pattern`` may backtrack exponentially in Python's engine ("" when it cannot)."""
    try:
        parsed = _sre_parser.parse(pattern, flags)
    except _std.error:
        return ""
    return _risk(parsed, inside_repeat=False)


def _risk(items: Any, *, inside_repeat: bool) -> str:
    for op, value in items:
        if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
            low, high, body = value
            repeats = high == _sre_constants.MAXREPEAT or high > 1
            if repeats and op != _POSSESSIVE:
                if inside_repeat:
                    return "repeats a group that itself repeats"
                if _has_branch(body):
                    return "repeats a group of alternatives"
            found = _risk(body, inside_repeat=inside_repeat or (repeats and op != _POSSESSIVE))
            if found:
                return found
        elif op == _sre_constants.SUBPATTERN:
            found = _risk(value[-1], inside_repeat=inside_repeat)
            if found:
                return found
        elif op == _sre_constants.BRANCH:
            for branch in value[1]:
                found = _risk(branch, inside_repeat=inside_repeat)
                if found:
                    return found
        elif op in (_sre_constants.ASSERT, _sre_constants.ASSERT_NOT):
            found = _risk(value[1], inside_repeat=inside_repeat)
            if found:
                return found
    return ""


def _has_branch(items: Any) -> bool:
    for op, value in items:
        if op == _sre_constants.BRANCH:
            return True
        if op == _sre_constants.SUBPATTERN and _has_branch(value[-1]):
            return True
    return False


def search(pattern: Any, string: Any, flags: int = 0) -> Any:
    return compile(pattern, flags).search(string)


def match(pattern: Any, string: Any, flags: int = 0) -> Any:
    return compile(pattern, flags).match(string)


def fullmatch(pattern: Any, string: Any, flags: int = 0) -> Any:
    return compile(pattern, flags).fullmatch(string)


def findall(pattern: Any, string: Any, flags: int = 0) -> list:
    return compile(pattern, flags).findall(string)


def finditer(pattern: Any, string: Any, flags: int = 0) -> Any:
    return compile(pattern, flags).finditer(string)


def split(pattern: Any, string: Any, maxsplit: int = 0, flags: int = 0) -> list:
    return compile(pattern, flags).split(string, maxsplit)


def sub(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    return compile(pattern, flags).sub(repl, string, count)


def subn(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> tuple:
    return compile(pattern, flags).subn(repl, string, count)


def purge() -> None:
    compile.cache_clear()


escape = _std.escape


def module() -> types.ModuleType:
    """This module dressed as ``re``: the flags and types generated code expects are there too."""
    safe = types.ModuleType("re", __doc__)
    names = ("compile", "search", "match", "fullmatch", "findall", "finditer", "split", "sub", "subn", "purge",
             "escape", "error")
    for name in names:
        setattr(safe, name, getattr(sys.modules[__name__], name))
    for name in ("A", "ASCII", "I", "IGNORECASE", "L", "LOCALE", "M", "MULTILINE", "S", "DOTALL", "U", "UNICODE",
                 "X", "VERBOSE", "NOFLAG", "RegexFlag", "Pattern", "Match"):
        if hasattr(_std, name):
            setattr(safe, name, getattr(_std, name))
    return safe
