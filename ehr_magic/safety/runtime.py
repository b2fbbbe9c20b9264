"""Run-time checks for the operations that run in C without letting the time limit in.

The executor stops a run by raising an exception in its thread, which Python delivers
only between bytecodes. A single C call that holds the interpreter lock (a big-integer
power, ``math.factorial``, ``sum`` over a huge range, repeating a string billions of
times, a backtracking regex) cannot be stopped that way, and the kernel waits with it.
The code guard refuses such calls when their sizes are constants; this module covers
sizes known only at run time. The executor rewrites ``a ** b``, ``a * b`` and ``a << b``
of generated code into ``checked_*`` calls that estimate the result's size first, and
gives the code a namespace whose ``re``, ``math``, ``range`` and ``pow`` do the same.
"""

from __future__ import annotations

import ast
import builtins
import math as _math
import types
from collections.abc import Iterator
from typing import Any

from ehr_magic.safety import regex

MAX_INT_BITS = 10**6  # ~300,000 digits: a few ms; beyond it, big-int C loops take seconds to hours
MAX_ELEMENTS = 10**7  # characters or items built by one repetition (a C loop of ~0.1 s)
MAX_C_LOOP = 10**7  # items a single C loop (sum, sorted, list...) may consume from one range
CHECKED = "__ehr_checked__"


class ResourceLimitError(ArithmeticError):
    """An operation would run in C far past the time limit; raised before it starts."""


def _too_big(what: str) -> ResourceLimitError:
    return ResourceLimitError(f"{what}; the time limit cannot stop it once it starts, so it was refused. Compute on "
                              "the data in SQL or with polars instead")


def _bits(value: Any) -> int:
    return abs(value).bit_length() if isinstance(value, int) and not isinstance(value, bool) else 0


def checked_pow(base: Any, exponent: Any, modulus: Any = None) -> Any:
    if modulus is None and isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * _bits(base) > MAX_INT_BITS:
            raise _too_big(f"{_describe(base)} ** {_describe(exponent)} would have about "
                           f"{int(exponent * _bits(base) * 0.30103):,} digits")
    return builtins.pow(base, exponent) if modulus is None else builtins.pow(base, exponent, modulus)


def checked_mul(left: Any, right: Any) -> Any:
    for sequence, count in ((left, right), (right, left)):
        if isinstance(count, int) and isinstance(sequence, (str, bytes, bytearray, list, tuple)):
            if len(sequence) * count > MAX_ELEMENTS:
                raise _too_big(f"repeating a {type(sequence).__name__} of {len(sequence):,} items {count:,} times "
                               f"would build {len(sequence) * count:,} items")
    if isinstance(left, int) and isinstance(right, int) and _bits(left) + _bits(right) > 64 * MAX_INT_BITS:
        raise _too_big("multiplying integers of millions of digits")
    return left * right


def checked_lshift(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int) and left and right > MAX_INT_BITS:
        raise _too_big(f"shifting by {right:,} bits would build an integer of millions of digits")
    return left << right


_OPERATIONS = {ast.Pow: "checked_pow", ast.Mult: "checked_mul", ast.LShift: "checked_lshift"}


class Instrument(ast.NodeTransformer):
    """Rewrites ``a ** b``, ``a * b``, ``a << b`` (and their ``x op= y`` forms) into checked calls.

    Constant operands are left alone (the code guard checks those before the run).
    """

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = _OPERATIONS.get(type(node.op))
        if name is None or (isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)):
            return node
        return ast.copy_location(ast.Call(func=_checked(name, node), args=[node.left, node.right], keywords=[]), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        name = _OPERATIONS.get(type(node.op))
        if name is None or not isinstance(node.target, ast.Name):
            return node
        value = ast.Call(func=_checked(name, node), keywords=[],
                         args=[ast.Name(id=node.target.id, ctx=ast.Load()), node.value])
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)


def _checked(name: str, at: ast.AST) -> ast.expr:
    return ast.copy_location(ast.Attribute(value=ast.Name(id=CHECKED, ctx=ast.Load()), attr=name, ctx=ast.Load()), at)


def instrument(tree: ast.Module) -> ast.Module:
    return ast.fix_missing_locations(Instrument().visit(tree))


class LongRange:
    """``range`` beyond ``MAX_C_LOOP`` items: iterated by Python code, so a C consumer
    (``sum``, ``sorted``, ``list``...) yields to the time limit between items."""

    def __init__(self, inner: range) -> None:
        self._range = inner

    def __iter__(self) -> Iterator[int]:
        for value in self._range:  # a Python-level loop: interruptible
            yield value

    def __reversed__(self) -> Iterator[int]:
        for value in reversed(self._range):
            yield value

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index: Any) -> Any:
        item = self._range[index]
        return safe_range(item.start, item.stop, item.step) if isinstance(item, range) else item

    def __contains__(self, value: object) -> bool:
        return value in self._range

    def __eq__(self, other: object) -> bool:
        return self._range == (other._range if isinstance(other, LongRange) else other)

    def __hash__(self) -> int:
        return hash(self._range)

    def __repr__(self) -> str:
        return repr(self._range)

    start = property(lambda self: self._range.start)
    stop = property(lambda self: self._range.stop)
    step = property(lambda self: self._range.step)
    count = property(lambda self: self._range.count)
    index = property(lambda self: self._range.index)


def safe_range(*args: Any) -> range | LongRange:
    inner = range(*args)
    return inner if len(inner) <= MAX_C_LOOP else LongRange(inner)


def _math_module() -> types.ModuleType:
    safe = types.ModuleType("math", _math.__doc__)
    for name in dir(_math):
        if not name.startswith("_"):
            setattr(safe, name, getattr(_math, name))

    def factorial(n: int) -> int:
        if isinstance(n, int) and n > 20_000:
            raise _too_big(f"math.factorial({n:,}) has about {int(n * _math.log10(max(n, 2))):,} digits")
        return _math.factorial(n)

    def comb(n: int, k: int) -> int:
        if isinstance(n, int) and isinstance(k, int) and min(k, n - k) > 20_000:
            raise _too_big(f"math.comb({n:,}, {k:,}) has millions of digits")
        return _math.comb(n, k)

    def perm(n: int, k: int | None = None) -> int:
        if isinstance(n, int) and (k if k is not None else n) > 20_000:
            raise _too_big(f"math.perm({n:,}, {k}) has millions of digits")
        return _math.perm(n, k)

    def prod(iterable: Any, *, start: Any = 1) -> Any:
        result = start
        for value in iterable:  # a Python loop, with each product checked
            result = checked_mul(result, value)
        return result

    for name, checked in {"factorial": factorial, "comb": comb, "perm": perm, "prod": prod, "pow": _math.pow}.items():
        setattr(safe, name, checked)
    return safe


def namespace_builtins() -> dict[str, Any]:
    """``__builtins__`` for generated code: ``import re``/``import math`` give the safe modules,
    and ``range``/``pow`` check sizes."""
    safe_modules = {"re": regex.module(), "math": _math_module()}
    original_import = builtins.__import__

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name in safe_modules:
            return safe_modules[name]
        return original_import(name, globals, locals, fromlist, level)

    table = dict(vars(builtins))
    table.update(__import__=guarded_import, range=safe_range, pow=checked_pow)
    return table


def checked_operations() -> types.SimpleNamespace:
    return types.SimpleNamespace(checked_pow=checked_pow, checked_mul=checked_mul, checked_lshift=checked_lshift)


def _describe(value: int) -> str:
    return f"{value:,}" if _bits(value) < 64 else f"an integer of {_bits(value):,} bits"
