"""Static evaluation of the strings in generated code, for the SQL check.

Model-written code builds SQL in many ways: literals, f-strings, ``+``, ``%``,
``.format``, ``"\\n".join([...])``, names assigned earlier, ``textwrap.dedent``. An
attacker (or a prompt-injected model) can also hide a statement: ``chr()`` codes,
``bytes([...]).decode()``, ``bytes.fromhex``, reversed strings. ``Folder.fold`` turns such
an expression into the text it will have at run time, as far as that text is visible
without running anything; the parts it cannot see (values of variables, function
results) become placeholders such as ``_q0_``, which parse as SQL identifiers.

Nothing here executes code: folding only combines constants.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import product

MAX_ALTERNATIVES = 8  # a name assigned in both branches of an `if` has two possible values
MAX_LENGTH = 200_000  # longer folded strings are cut (a guard must stay fast)
_FIELD = re.compile(r"\{([^{}]*)\}")
_PERCENT = re.compile(r"%(\([^)]*\))?[-#0 +]*\d*(\.\d+)?[sdifr]")
_OBFUSCATING_CALLS = {"chr", "bytes", "bytearray", "fromhex", "decode", "translate", "maketrans",
                      "reversed", "b64decode", "unhexlify", "a85decode", "b32decode", "rot13", "ord"}


@dataclass(frozen=True)
class Folded:
    """The visible text of a string expression.

    ``exact``: no part is unknown. ``obfuscated``: built from character codes, bytes or a
    reversal, which ordinary code never needs for SQL. ``unknown``: number of placeholders.
    """

    text: str
    exact: bool = True
    obfuscated: bool = False
    unknown: int = 0

    def __add__(self, other: Folded) -> Folded:
        return Folded((self.text + other.text)[:MAX_LENGTH], self.exact and other.exact,
                      self.obfuscated or other.obfuscated, self.unknown + other.unknown)

    @property
    def has_constant_text(self) -> bool:
        return bool(_PLACEHOLDER.sub("", self.text).strip())


_PLACEHOLDER = re.compile(r"_q\d+_")


def placeholder(index: int) -> Folded:
    return Folded(f"_q{index}_", exact=False, unknown=1)


Env = dict[str, list[Folded]]


class Folder:
    """Folds string expressions against ``env`` (name -> possible values)."""

    def __init__(self, env: Env | None = None) -> None:
        self.env: Env = env if env is not None else {}
        self._counter = 0

    def _next_part(self, parts: Iterator[Folded], _match: re.Match[str]) -> Folded:
        return next(parts, self._unknown())

    def _unknown(self) -> Folded:
        self._counter += 1
        return placeholder(self._counter)

    def fold(self, node: ast.AST | None) -> list[Folded] | None:
        """Possible texts of ``node``; ``None`` if it is not a string expression we can see."""
        if node is None:
            return None
        try:
            result = self._fold(node, depth=0)
        except RecursionError:
            return None
        return result[:MAX_ALTERNATIVES] if result else None

    def part(self, node: ast.AST, depth: int) -> list[Folded]:
        """Like ``fold`` but an unknown part becomes a placeholder (and a number its text)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return [Folded(str(node.value))]
        folded = self._fold(node, depth + 1)
        return folded if folded else [self._unknown()]

    def _fold(self, node: ast.AST, depth: int) -> list[Folded] | None:
        if depth > 40:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return [Folded(node.value[:MAX_LENGTH])]
            if isinstance(node.value, bytes):
                return None  # bytes become text only through .decode(), handled below
            return None
        if isinstance(node, ast.Name):
            return list(self.env[node.id]) if node.id in self.env else None
        if isinstance(node, ast.JoinedStr):
            pieces: list[list[Folded]] = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    pieces.append([Folded(value.value)])
                elif isinstance(value, ast.FormattedValue):
                    inner = self.part(value.value, depth) if value.format_spec is None else None
                    pieces.append(inner or [self._unknown()])
            return _concat(pieces)
        if isinstance(node, ast.BinOp):
            return self._binop(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, depth)
        if isinstance(node, ast.IfExp):
            both = (self._fold(node.body, depth + 1) or []) + (self._fold(node.orelse, depth + 1) or [])
            return both[:MAX_ALTERNATIVES] or None
        return None

    def _binop(self, node: ast.BinOp, depth: int) -> list[Folded] | None:
        if isinstance(node.op, ast.Add):
            left, right = self._fold(node.left, depth + 1), self._fold(node.right, depth + 1)
            if left is None and right is None:
                return None
            return _concat([left or [self._unknown()], right or [self._unknown()]])
        if isinstance(node.op, ast.Mod):
            left = self._fold(node.left, depth + 1)
            if left is None:
                return None
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            out = []
            for template in left:
                parts = iter([self.part(v, depth)[0] for v in values])
                out.append(_substitute(template, _PERCENT, functools.partial(self._next_part, parts)))
            return out
        if isinstance(node.op, ast.Mult):
            for text_side, count_side in ((node.left, node.right), (node.right, node.left)):
                texts = self._fold(text_side, depth + 1)
                count = int_value(count_side)
                if texts is not None and count is not None and 0 <= count <= 1000:
                    return [Folded((t.text * count)[:MAX_LENGTH], t.exact, t.obfuscated, t.unknown * count)
                            for t in texts]
        return None

    def _subscript(self, node: ast.Subscript, depth: int) -> list[Folded] | None:
        texts = self._fold(node.value, depth + 1)
        if texts is None or not isinstance(node.slice, ast.Slice):
            return None
        given = (node.slice.lower, node.slice.upper, node.slice.step)
        bounds = [int_value(b) if b is not None else None for b in given]
        if any(b is None and g is not None for b, g in zip(bounds, given)):
            return None
        lower, upper, step = bounds
        if step == 0:
            return None
        reversed_ = step is not None and step < 0
        return [Folded(t.text[lower:upper:step], t.exact, t.obfuscated or reversed_, t.unknown) for t in texts]

    def _call(self, node: ast.Call, depth: int) -> list[Folded] | None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if isinstance(func, ast.Name):
            if name == "chr" and len(node.args) == 1:
                code = int_value(node.args[0])
                if code is not None and 0 <= code < 0x110000:
                    return [Folded(chr(code), obfuscated=True)]
                return None
            if name in ("str", "dedent") and len(node.args) == 1:
                return self._fold(node.args[0], depth + 1)
            if name in ("bytes", "bytearray"):
                return None  # only meaningful with .decode()
            return None
        if not isinstance(func, ast.Attribute):
            return None
        if name == "decode":
            raw = bytes_value(func.value, self, depth)
            if raw is None:
                return None
            return [Folded(raw.decode("utf-8", errors="replace")[:MAX_LENGTH], obfuscated=True)]
        if name == "dedent" and len(node.args) == 1:
            return self._fold(node.args[0], depth + 1)
        base = self._fold(func.value, depth + 1)
        if base is None:
            return None
        if name == "join" and len(node.args) == 1:
            items = self._iterable(node.args[0], depth)
            if items is None:
                return [b + self._unknown() for b in base]
            out = []
            for sep in base:
                for combo in product(*items) if items else [()]:
                    joined = Folded("")
                    for i, item in enumerate(combo):
                        joined = joined + (sep if i else Folded("")) + item
                    out.append(joined)
                    if len(out) >= MAX_ALTERNATIVES:
                        return out
            return out
        if name == "format":
            args = [self.part(a, depth)[0] for a in node.args]
            kwargs = {k.arg: self.part(k.value, depth)[0] for k in node.keywords if k.arg}
            position = iter(range(len(args)))

            def field(match: re.Match[str]) -> Folded:
                key = match.group(1).split("!")[0].split(":")[0].split(".")[0].split("[")[0]
                if key == "":
                    index = next(position, None)
                    return args[index] if index is not None and index < len(args) else self._unknown()
                if key.isdigit():
                    return args[int(key)] if int(key) < len(args) else self._unknown()
                return kwargs.get(key, self._unknown())

            return [_substitute(b, _FIELD, field) for b in base]
        if name in ("upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize", "casefold", "swapcase"):
            if node.args:
                return base
            return [Folded(getattr(b.text, name)(), b.exact, b.obfuscated, b.unknown) for b in base]
        if name == "replace" and len(node.args) == 2:
            old, new = (self._fold(a, depth + 1) for a in node.args)
            if old and new and old[0].exact and new[0].exact:
                return [Folded(b.text.replace(old[0].text, new[0].text), b.exact, b.obfuscated, b.unknown)
                        for b in base]
            return [Folded(b.text, False, b.obfuscated, b.unknown + 1) for b in base]
        if name == "translate":
            return [Folded(b.text, False, True, b.unknown + 1) for b in base]
        return None

    def _iterable(self, node: ast.AST, depth: int) -> list[list[Folded]] | None:
        """Items of a literal sequence, a comprehension over one, ``map(chr, ...)`` or ``reversed``."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            if any(isinstance(e, ast.Starred) for e in node.elts) or len(node.elts) > 2000:
                return None
            return [self.part(e, depth) for e in node.elts]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "".join("abc")
            return [[Folded(c)] for c in node.value]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "reversed" and len(node.args) == 1:
                inner = self._iterable(node.args[0], depth)
                if not inner:
                    return None
                return [[Folded(i.text, i.exact, True, i.unknown) for i in item] for item in reversed(inner)]
            if node.func.id == "map" and len(node.args) == 2 and isinstance(node.args[0], ast.Name):
                codes = constant_sequence(node.args[1])
                if node.args[0].id == "chr" and codes is not None:
                    return [[Folded(chr(c), obfuscated=True)] for c in codes
                            if isinstance(c, int) and 0 <= c < 0x110000]
                return None
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            generator = node.generators[0]
            values = constant_sequence(generator.iter)
            if values is None or generator.ifs or not isinstance(generator.target, ast.Name) or len(values) > 2000:
                return None
            out = []
            for value in values:
                env = dict(self.env)
                if isinstance(value, str):
                    env[generator.target.id] = [Folded(value)]
                    out.append(Folder(env).part(node.elt, depth))
                elif isinstance(value, int) and _is_chr_of(node.elt, generator.target.id) and 0 <= value < 0x110000:
                    out.append([Folded(chr(value), obfuscated=True)])
                else:
                    return None
            return out
        return None


def _is_chr_of(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "chr"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == name)


def _concat(pieces: list[list[Folded]]) -> list[Folded]:
    results = [Folded("")]
    for options in pieces:
        results = [a + b for a in results for b in options][:MAX_ALTERNATIVES]
    return results


def _substitute(template: Folded, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], Folded]) -> Folded:
    out = Folded("", template.exact, template.obfuscated, template.unknown)
    last = 0
    for match in pattern.finditer(template.text):
        out = out + Folded(template.text[last:match.start()]) + replace(match)
        last = match.end()
    return out + Folded(template.text[last:])


def constant_sequence(node: ast.AST) -> list[object] | None:
    """The items of a literal list/tuple/set of constants, or of ``range(...)`` (small)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items: list[object] = []
        for element in node.elts:
            if isinstance(element, ast.Constant):
                items.append(element.value)
            else:
                value = int_value(element)
                if value is None:
                    return None
                items.append(value)
        return items
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return list(node.value)
    return None


def bytes_value(node: ast.AST, folder: Folder, depth: int) -> bytes | None:
    """Bytes an expression evaluates to: b'...', bytes([...]), bytes.fromhex('...'), '...'.encode()."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
        return node.value
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("bytes", "bytearray") and len(node.args) == 1:
            items = constant_sequence(node.args[0])
            if items is not None and all(isinstance(i, int) and 0 <= i < 256 for i in items):
                return bytes(items)  # type: ignore[arg-type]
            return None
        if isinstance(func, ast.Attribute) and func.attr == "fromhex" and len(node.args) == 1:
            text = folder.fold(node.args[0])
            if text and text[0].exact:
                try:
                    return bytes.fromhex(text[0].text)
                except ValueError:
                    return None
            return None
        if isinstance(func, ast.Attribute) and func.attr == "encode":
            text = folder.fold(func.value)
            return text[0].text.encode() if text and text[0].exact else None
    return None


# -- constant integers (for the resource rules) ------------------------------------------------

HUGE = float("inf")


def int_value(node: ast.AST | None) -> int | None:
    """The value of a constant integer expression (``10**10``, ``-3``, ``2*1024``);
    ``None`` if it is not one. Results beyond 10**30 are capped at 10**30 + 1."""
    value = _number(node, 0)
    if value is None or isinstance(value, float) and value != HUGE:
        return None
    if value == HUGE:
        return 10**30 + 1
    return int(value)


def _number(node: ast.AST | None, depth: int) -> int | float | None:
    """The constant integer; ``HUGE`` or ``-HUGE`` (the only floats) beyond 10**30 (a sum, a
    product or a power beyond it is ``HUGE`` whatever its sign); None when ``node`` is not a
    constant integer expression."""
    if node is None or depth > 20:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand, depth + 1)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp):
        left, right = _number(node.left, depth + 1), _number(node.right, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(left, float) or isinstance(right, float):  # HUGE or -HUGE: (-(2**300)) ** 2 is huge
            return HUGE
        if isinstance(node.op, ast.Add):
            return _cap(left + right)
        if isinstance(node.op, ast.Sub):
            return _cap(left - right)
        if isinstance(node.op, ast.Mult):
            return _cap(left * right)
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
        if isinstance(node.op, ast.Pow):
            if right < 0:
                return None
            if abs(left) <= 1:
                return left ** min(right, 2)
            if right * abs(left).bit_length() > 200:
                return HUGE
            return _cap(left**right)
        if isinstance(node.op, ast.LShift) and 0 <= right:
            return HUGE if right > 200 else _cap(left << right)
    return None


def _cap(value: int) -> int | float:
    return HUGE if abs(value) > 10**30 else value


def pow_bits(node: ast.BinOp) -> float:
    """Approximate size in bits of ``a ** b`` for constant ints (0 if not constant)."""
    base, exponent = _number(node.left, 0), _number(node.right, 0)
    if base is None or exponent is None:
        return 0.0
    if isinstance(base, float) or isinstance(exponent, float):  # HUGE
        return HUGE if exponent == HUGE and base not in (0, 1, -1) else 0.0
    if exponent < 0 or abs(base) <= 1:
        return 0.0
    return float(exponent) * abs(base).bit_length()


def contains_obfuscation(node: ast.AST) -> bool:
    """Whether an expression uses character codes, bytes or reversal to build text."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _OBFUSCATING_CALLS:
                return True
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Slice) and sub.slice.step is not None:
            step = int_value(sub.slice.step)
            if step is None or step < 0:
                return True
    return False
