"""The labelled verdict corpora (refusal, failure acknowledgement, success claim) and their split.

The tuning part is `<name>.txt` (the rules were built on it) and `<name>.round1.txt` (the first
held-out round, 100 sentences written after the rules were frozen, measured, then made tuning data);
the classifier (toolsweep/evaluator/verdict_model.py) is trained on both. `<name>.heldout.txt` (the
second round, 160 sentences in styles the tuning part lacks) was written before the reader or the
classifier was changed and is never tuned on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = ("refusal", "acknowledgement", "success_claim")


@dataclass(frozen=True)
class Example:
    text: str
    label: bool


def _read(path: Path) -> list[Example]:
    """Every labelled line of one file (`<label>\\t<text>`, `\\n` for a line break)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, text = line.split("\t", 1)
        out.append(Example(text.replace("\\n", "\n"), label == "1"))
    return out


def split(name: str, held_out: bool) -> list[Example]:
    """The tuning part (with the first held-out round) or the held-out part of one corpus."""
    if held_out:
        return _read(HERE / f"{name}.heldout.txt")
    return _read(HERE / f"{name}.txt") + round_one(name)


def round_one(name: str) -> list[Example]:
    """The first held-out round, part of tuning now (kept apart to choose the classifier's blend)."""
    return _read(HERE / f"{name}.round1.txt")


def rates(examples: list[Example], detector) -> tuple[float, float, list[Example], list[Example]]:
    """(false positive rate, false negative rate, false positives, false negatives) of `detector`."""
    pos = [e for e in examples if e.label]
    neg = [e for e in examples if not e.label]
    fp = [e for e in neg if detector(e.text)]
    fn = [e for e in pos if not detector(e.text)]
    return len(fp) / max(len(neg), 1), len(fn) / max(len(pos), 1), fp, fn


def load_all(name: str) -> list[Example]:
    return split(name, False) + split(name, True)
