"""Skill cards: what a skill computes, from what, how to read it, and where it comes from.

A card is what the analyst reads (``%ehr skill show``), what the model sees when it
asks for a skill, and what the tests check: its ``vectors`` are hand-computed cases
(inputs and the expected output) that every skill must reproduce.
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

KINDS = ("ehr", "calculator", "user")


@dataclass(frozen=True)
class Vector:
    """One hand-computed reference case.

    For a calculator, ``call`` holds its arguments. For an EHR skill, ``data`` holds
    the tiny tables of a made-up patient (see ``ehr_magic.skills.testing``) and
    ``call`` the keyword arguments; ``expected`` holds the expected columns of the
    single result row (or a list of rows, in order), or ``{"value": x}`` for a scalar.
    """

    description: str
    expected: dict[str, Any] | list[dict[str, Any]]
    call: dict[str, Any] = field(default_factory=dict)
    data: dict[str, list[dict[str, Any]]] | None = None


@dataclass(frozen=True, repr=False)
class Card:
    name: str
    title: str
    purpose: str
    eligibility: str
    inputs: str
    output: str
    interpretation: str
    source: str
    keywords: tuple[str, ...] = ()
    limits: str = ""
    kind: str = "ehr"  # one of KINDS
    level: str = ""  # what one output row is: "ICU stay", "admission", "measurement", ...
    signature: str = ""  # filled in at registration
    schemas: tuple[str, ...] = ("mimic_iv", "ehrsql_mimic_iv")  # databases it runs on; () = any
    vectors: tuple[Vector, ...] = ()
    version: int = 1  # user skills: 1, 2, ... (saving again makes a new version)
    extra: dict[str, Any] = field(default_factory=dict)  # user skills: params, code, ...

    def __repr__(self) -> str:
        return f"<Card {self.call_name}: {self.title}>"

    def __str__(self) -> str:
        return self.text()

    @property
    def call_name(self) -> str:
        """How generated code calls it: ``skills.sofa`` or ``skills.calc.bmi``."""
        return f"skills.{self.name}"

    def one_line(self) -> str:
        """``skills.name(signature): purpose`` (the form listed in the model prompt)."""
        purpose = self.purpose.strip().split("\n")[0]
        return f"{self.call_name}{self.signature}: {purpose}"

    def text(self, *, vectors: bool = True) -> str:
        """The whole card as plain text."""
        lines = [f"{self.title} ({self.call_name}, {self.kind} skill"
                 + (f", v{self.version}" if self.kind == "user" else "") + ")",
                 f"Call: {self.call_name}{self.signature}"]
        for label, value in [
            ("Purpose", self.purpose), ("Eligibility", self.eligibility), ("Inputs", self.inputs),
            ("Output", self.output), ("Interpretation", self.interpretation), ("Limits", self.limits),
            ("Source", self.source), ("Datasets", ", ".join(self.schemas) or "any"),
        ]:
            if value:
                lines.append(textwrap.fill(f"{label}: {value.strip()}", 100, subsequent_indent="  "))
        if self.extra.get("params"):
            lines.append("Parameters: " + ", ".join(f"{k}={v!r}" for k, v in self.extra["params"].items()))
        if self.extra.get("code"):
            lines.append("Code:\n" + textwrap.indent(self.extra["code"], "    "))
        if self.extra.get("tests"):
            lines.append(f"Accepted test cases: {len(self.extra['tests'])}")
        if vectors and self.vectors:
            lines.append("Reference cases:")
            for v in self.vectors:
                lines.append(f"  - {v.description} -> {_short(v.expected)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["keywords"] = list(self.keywords)
        data["schemas"] = list(self.schemas)
        data["vectors"] = [asdict(v) for v in self.vectors]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Card:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["keywords"] = tuple(values.get("keywords", ()))
        values["schemas"] = tuple(values.get("schemas", ("mimic_iv", "ehrsql_mimic_iv")))
        values["vectors"] = tuple(Vector(**v) if isinstance(v, dict) else v for v in values.get("vectors", ()))
        missing = [n for n in ("name", "title", "purpose") if not values.get(n)]
        if missing:
            from ehr_magic.skills.errors import SkillError

            raise SkillError(f"A skill card needs {', '.join(missing)}; add them to the card.")
        for name in ("eligibility", "inputs", "output", "interpretation", "source"):
            values.setdefault(name, "")
        return cls(**values)

    def evolve(self, **changes: Any) -> Card:
        return replace(self, **changes)


def _short(expected: Any) -> str:
    if isinstance(expected, dict):
        return ", ".join(f"{k}={v}" for k, v in expected.items())
    if isinstance(expected, list):
        return "; ".join(_short(e) for e in expected)
    return repr(expected)
