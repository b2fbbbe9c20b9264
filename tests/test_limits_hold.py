"""Time limits that hold: code that would run in C past the limit, holding the
interpreter lock, is refused before it starts or runs in an interruptible way. Each run
ends within its limit plus 2 s, and the next run in the same process works."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ehr_magic.runtime.executor import Executor, base_namespace
from ehr_magic.db import connect
from ehr_magic.safety import regex
from ehr_magic.safety.guard import check_code

LIMIT = 2.0
SLACK = 2.0


@pytest.fixture(scope="module")
def ehr(ehrsql_db: Path):
    with connect(ehrsql_db) as database:
        yield database


BLOCKING = {
    # the case: minutes in Python's backtracking engine
    "regex bomb": "answer = re.match('(a+)+$', 'a' * 32 + 'b')",
    "regex bomb after import": "import re as regex\nanswer = regex.search('(a|aa)+$', 'a' * 40 + 'b')",
    "regex bomb from import": "from re import fullmatch\nanswer = fullmatch('(x+x+)+y', 'x' * 40)",
    "regex bomb in a variable": "n = 32\npattern = '(a*)*$'\nanswer = re.fullmatch(pattern, 'a' * n + 'b')",
    "big integer power": "n = 10\nanswer = n ** (n ** 8) % 7",
    "big integer power, pow()": "n = 10\nanswer = pow(n, n ** 8) % 7",
    "big integer power, augmented": "x = 7\nx **= 10 ** 8\nanswer = x % 5",
    "big shift": "n = 10 ** 9\nanswer = (1 << n) % 7",
    "factorial": "n = 10 ** 7\nanswer = math.factorial(n) % 7",
    "factorial after import": "import math as m\nn = 10 ** 7\nanswer = m.factorial(n) % 7",
    "binomial": "n = 10 ** 7\nanswer = math.comb(n, n // 2) % 7",
    "string repetition": "n = 10 ** 10\nanswer = len('ab' * n)",
    "list repetition": "n = 10 ** 10\nanswer = len([0] * n)",
    "sum of a huge range": "n = 10 ** 11\nanswer = sum(range(n))",
    "sorted huge range": "n = 10 ** 9\nanswer = sorted(range(n, 0, -1))[0]",
    "max of a huge range": "n = 10 ** 11\nanswer = max(range(n))",
    "DuckDB cross join": ("answer = ehr.sql('SELECT count(*) FROM range(1000000) a, range(1000000) b "
                          "WHERE (a.range + b.range) % 7 = 3')"),
    "Python loop": "while True:\n    pass",
}


@pytest.mark.parametrize("name", list(BLOCKING))
def test_a_run_never_outlives_its_limit(ehr, name: str) -> None:
    code = BLOCKING[name]
    report = check_code(code)
    assert report.allowed, ("the guard refuses it before any run, which is fine, but this test wants the run: "
                            f"{report.describe()}")
    started = time.monotonic()
    result = Executor(ehr, timeout=LIMIT).run(code, base_namespace(ehr))
    elapsed = time.monotonic() - started
    assert elapsed < LIMIT + SLACK, f"{name} ran {elapsed:.1f} s"
    if name.startswith("regex"):  # a linear-time engine simply answers: no match
        assert result.ok and not result.answer, result.error and result.error.describe()
    else:
        assert not result.ok
        assert result.error.type in ("Timeout", "ResourceLimitError"), result.error.describe()
    # the process is usable right after
    follow = Executor(ehr, timeout=LIMIT).run("answer = ehr.sql('SELECT count(*) AS n FROM patients')['n'][0]")
    assert follow.ok and follow.answer > 0


def test_the_refusal_says_what_to_do(ehr) -> None:
    result = Executor(ehr, timeout=LIMIT).run(BLOCKING["factorial"])
    assert "SQL or with polars" in result.error.message


@pytest.mark.parametrize("code,expected", [
    ("answer = re.findall(r'(\\d+) mg', '5 mg and 10 mg')", ["5", "10"]),
    ("answer = re.sub(r'(\\w+)@(\\w+)', r'\\2 at \\1', 'me@home')", "home at me"),
    ("answer = bool(re.search('potassium', 'Serum POTASSIUM', re.IGNORECASE))", True),
    ("answer = re.match(r'(?P<n>\\d+)', '42x').group('n')", "42"),
    ("answer = re.split(r'[,;]\\s*', 'a, b;c')", ["a", "b", "c"]),
    ("answer = [m.start() for m in re.finditer('a', 'banana')]", [1, 3, 5]),
    ("answer = re.compile('^k', re.M).findall('k1\\nk2')", ["k", "k"]),
    ("answer = re.sub('x', lambda m: 'y', 'axbx')", "ayby"),
    ("answer = re.escape('a.b')", "a\\.b"),
    # look-behind and back-references need Python's engine: allowed when they cannot blow up
    ("answer = re.findall(r'(?<=\\$)\\d+', 'cost $12 and $7')", ["12", "7"]),
    ("answer = bool(re.search(r'(\\w)\\1', 'hello'))", True),
    ("import re\nanswer = re.fullmatch('[a-z]+', 'abc') is not None", True),
])
def test_regexes_keep_the_re_api(ehr, code: str, expected: object) -> None:
    result = Executor(ehr, timeout=LIMIT).run(code)
    assert result.ok, result.error.describe()
    assert result.answer == expected


def test_a_backtracking_pattern_that_needs_python_s_engine_is_refused() -> None:
    with pytest.raises(regex.UnsafePatternError, match="nested repetition"):
        regex.compile(r"((\w)\2+)+$")
    assert regex.backtracking_risk(r"(a+)+$") and regex.backtracking_risk(r"(a|aa)*c")
    assert not regex.backtracking_risk(r"(?<=x)\d+") and not regex.backtracking_risk(r"(ab)+c")


def test_small_arithmetic_is_unchanged(ehr) -> None:
    code = ("x = 3\nx **= 2\ny = [1, 2] * 3\nz = 'ab' * x\n"
            "answer = (x, 2 ** x, len(y), z, 1 << x, pow(2, 10, 1000), math.prod([2, 3]))")
    result = Executor(ehr, timeout=LIMIT).run(code)
    assert result.ok, result.error.describe()
    assert result.answer == (9, 512, 6, "ab" * 9, 512, 24, 6)


def test_ranges_behave_like_ranges(ehr) -> None:
    code = ("r = range(10 ** 12)\nanswer = (len(r), r[5], 10 ** 11 in r, list(range(3)), r[-1], "
            "next(iter(r)), list(r[:3]))")
    result = Executor(ehr, timeout=LIMIT).run(code)
    assert result.ok, result.error.describe()
    assert result.answer == (10**12, 5, True, [0, 1, 2], 10**12 - 1, 0, [0, 1, 2])


def test_the_user_s_own_namespace_keeps_its_builtins(ehr) -> None:
    import builtins
    user_ns = {"__builtins__": builtins}
    Executor(ehr, timeout=LIMIT).run("answer = 1", user_ns)
    assert user_ns["__builtins__"] is builtins
