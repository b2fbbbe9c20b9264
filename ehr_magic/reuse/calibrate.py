"""Calibrating reuse on the memory alone: how similar must a question be to a remembered
one before the adapted cell is trusted?

Cross-validation inside the memory's own cells answers that without looking at any
question under evaluation. The cells are split into folds, keeping questions of the same
wording (once their values are taken out) in one fold, so a held-out question meets only
other phrasings, as a new analyst's question would; each fold's questions are asked of a
reuser that holds only the other folds, with every threshold off. An answer
is correct when it equals what the held-out cell's own code returns, so no gold answers
are needed: the memory is its own test set. Each answer gives an observation (the
question's similarity to the reused cell, the margin over the best cell of another kind,
and whether it was right). ``choose`` fits the chance of being right as a non-decreasing
function of similarity (isotonic regression) and answers only where that chance reaches
the target, with the answered set's one-sided Wilson lower bound at the target too. A memory too small to give
that confidence keeps the conservative defaults.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_magic import files
from ehr_magic.reuse.match import DEFAULT_MARGIN, DEFAULT_THRESHOLD
from ehr_magic.knowledge.handle import Database

if TYPE_CHECKING:
    from ehr_magic.memory import MemoryStore

TARGET_PRECISION = 0.98
CONFIDENCE_Z = 1.645  # one-sided 95%
MIN_ANSWERED = 50  # fewer cross-validated answers than this cannot show 98% with confidence
MARGINS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)

Cell = tuple[int, str, str]  # (entry id, question, code)


@dataclass(frozen=True)
class Observation:
    score: float
    margin: float
    correct: bool


@dataclass(frozen=True)
class Calibration:
    """The thresholds reuse applies, and the evidence for them."""

    threshold: float
    margin: float
    target: float = TARGET_PRECISION
    observations: int = 0  # cross-validated answers seen (with every threshold off)
    answered: int = 0  # of those, above the chosen thresholds
    correct: int = 0
    lower_bound: float = 0.0  # Wilson lower bound of precision at the chosen thresholds
    source: str = "default"  # "cross-validation" or "default"

    @property
    def precision(self) -> float:
        return self.correct / self.answered if self.answered else 0.0

    def describe(self) -> str:
        if self.source != "cross-validation":
            return (f"default thresholds (similarity >= {self.threshold:.2f}, margin >= {self.margin:.2f}): the "
                    f"memory gave {self.observations} cross-validated answers, too few to calibrate")
        return (f"similarity >= {self.threshold:.2f}, margin >= {self.margin:.2f}: {self.correct}/{self.answered} "
                f"right in cross-validation over the memory ({self.precision:.1%}, at least {self.lower_bound:.1%} "
                f"with 95% confidence; target {self.target:.0%})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson_lower(correct: int, total: int, z: float = CONFIDENCE_Z) -> float:
    """One-sided Wilson score lower bound of a proportion."""
    if total == 0:
        return 0.0
    p = correct / total
    centre = p + z * z / (2 * total)
    spread = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return (centre - spread) / (1 + z * z / total)


def isotonic(observations: Sequence[Observation]) -> list[tuple[float, float]]:
    """P(correct | similarity) as a non-decreasing step function: ``(lowest score, probability)``
    steps in ascending order (pool-adjacent-violators over the observations sorted by score)."""
    tied: dict[float, list[float]] = {}  # equal scores form one point
    for o in observations:
        point = tied.setdefault(o.score, [0.0, 0.0])
        point[0] += o.correct
        point[1] += 1
    blocks: list[list[float]] = []  # [lowest score, correct, count]
    for score in sorted(tied):
        blocks.append([score, *tied[score]])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            last = blocks.pop()
            blocks[-1][1] += last[1]
            blocks[-1][2] += last[2]
    return [(low, correct / count) for low, correct, count in blocks]


def choose(observations: Sequence[Observation], *, target: float = TARGET_PRECISION, z: float = CONFIDENCE_Z,
           min_answered: int = MIN_ANSWERED) -> Calibration:
    """The (threshold, margin) answering the most questions where the calibrated chance of
    being right, P(correct | similarity) from an isotonic fit, is at least ``target``.

    A condition on each answer's own chance, not on the average over the memory's
    questions, keeps precision at the target when new questions are less like the memory
    than its own questions are to each other (they then score lower, and the answers left
    are still ones whose similarity earned the target). The Wilson lower bound of the
    answered set's precision must reach the target too.
    """
    best: Calibration | None = None
    for margin in MARGINS:
        kept = [o for o in observations if o.margin >= margin]
        steps = isotonic(kept)
        passing = [low for low, probability in steps if probability >= target]
        if not passing:
            continue
        threshold = round(min(passing), 3)
        answered = [o for o in kept if o.score >= threshold]
        correct = sum(o.correct for o in answered)
        if len(answered) < min_answered:
            continue
        bound = wilson_lower(correct, len(answered), z)
        if bound < target:
            continue
        if best is None or len(answered) > best.answered:
            best = Calibration(threshold, margin, target, len(observations), len(answered), correct, bound,
                               "cross-validation")
    if best is None:
        return Calibration(DEFAULT_THRESHOLD, DEFAULT_MARGIN, target, len(observations))
    return best


def observe(ehr: Database, cells: Sequence[Cell], *, folds: int = 5, seed: int = 0, timeout: float = 10.0,
            progress: Callable[[int, int], None] | None = None) -> list[Observation]:
    """Cross-validated reuse answers over ``cells``, each judged against its own code's answer."""
    from ehr_magic import skills
    from ehr_magic.runtime.executor import Executor, base_namespace
    from ehr_magic.runtime.answers import normalize_answer, same_answer
    from ehr_magic.reuse.reuser import Reuser

    groups = _folds(ehr, cells, folds, seed)
    order = [cell for group in groups for cell in group]
    executor = Executor(ehr, timeout=timeout)
    observations: list[Observation] = []
    done = 0
    for k, held_out in enumerate(groups):
        reuser = Reuser(ehr, timeout=timeout, threshold=0.0, margin=-1.0)
        reuser.add_many((cell_id, question, code, "accepted") for j, group in enumerate(groups) if j != k
                        for cell_id, question, code in group)
        for _, question, code in held_out:
            done += 1
            if progress is not None:
                progress(done, len(order))
            result = reuser.answer(question)
            if not result.answered:
                continue
            own = executor.run(code, base_namespace(ehr, skills.namespace(ehr)))
            if not own.ok or not own.has_answer:
                continue  # a cell that does not run here tells nothing about reuse
            right = same_answer(normalize_answer(result.answer), normalize_answer(own.answer))
            observations.append(Observation(result.score, result.margin, right))
    return observations


def _folds(ehr: Database, cells: Sequence[Cell], folds: int, seed: int) -> list[list[Cell]]:
    """Folds that keep every wording together: cells whose questions read the same once their
    values are taken out (``Template.tokens``) fall in one fold. A held-out question then never
    finds its own wording with other values in memory, as a new analyst's phrasing would not;
    folds of single questions would let near-copies vouch for each other and overstate precision."""
    from ehr_magic.reuse.match import ReuseIndex

    index = ReuseIndex(ehr)
    index.add_many((cell_id, question, code, "accepted") for cell_id, question, code in cells)
    wordings: dict[tuple[str, ...], list[Cell]] = {}
    for cell in cells:
        template = index.templates.get(cell[0])
        key = template.tokens if template is not None else (cell[1],)
        wordings.setdefault(key, []).append(cell)
    keys = sorted(wordings)
    random.Random(seed).shuffle(keys)
    groups: list[list[Cell]] = [[] for _ in range(folds)]
    for key in keys:  # the smallest fold takes the next wording: folds stay near equal
        min(groups, key=len).extend(wordings[key])
    return groups


def calibrate(ehr: Database, cells: Sequence[Cell], **options: Any) -> Calibration:
    """``choose(observe(...))``: thresholds for a memory of ``cells``."""
    choose_options = {k: options.pop(k) for k in ("target", "z", "min_answered") if k in options}
    return choose(observe(ehr, cells, **options), **choose_options)


def fingerprint(cells: Sequence[Cell]) -> str:
    """A digest of the memory a calibration was computed on."""
    digest = hashlib.sha256()
    for cell_id, question, code in sorted(cells):
        digest.update(f"{cell_id}\x00{question}\x00{code}\x01".encode())
    return digest.hexdigest()


def _path(store: MemoryStore) -> Path | None:
    path = getattr(store, "path", None)
    return Path(f"{path}.calibration.json") if path and str(path) != ":memory:" else None


def save_calibration(store: MemoryStore, cells: Sequence[Cell], calibration: Calibration) -> None:
    """Keep ``calibration`` beside the store's file (written atomically)."""
    path = _path(store)
    if path is None:
        return
    files.write_text(path, json.dumps({"fingerprint": fingerprint(cells), **calibration.to_dict()}))


def load_calibration(store: MemoryStore, cells: Sequence[Cell]) -> Calibration | None:
    """The saved calibration of the store, if it was computed on exactly these cells."""
    path = _path(store)
    if path is None or not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("fingerprint") != fingerprint(cells):
        return None
    names = {f.name for f in fields(Calibration)}
    return Calibration(**{k: v for k, v in saved.items() if k in names})
