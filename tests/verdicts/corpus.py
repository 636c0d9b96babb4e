"""The labelled verdict corpora (refusal, failure acknowledgement, success claim) and their split.

`<name>.txt` is the tuning part: the detectors were built on it (its lines fell into a first held-out
part by the hash of their text, measured and then folded into tuning). `<name>.heldout1.txt` (round 1,
100 sentences) was written after the detectors were frozen and has been measured and read since.
`<name>.heldout.txt` (round 2, 160 sentences, in styles the other parts lack) was written before the
reader was changed again and is never tuned on."""

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
    """The tuning or the (round 2) held-out part of one corpus."""
    return _read(HERE / (f"{name}.heldout.txt" if held_out else f"{name}.txt"))


def round_one(name: str) -> list[Example]:
    """The first held-out round: measured and reported, so no longer unseen."""
    return _read(HERE / f"{name}.heldout1.txt")


def rates(examples: list[Example], detector) -> tuple[float, float, list[Example], list[Example]]:
    """(false positive rate, false negative rate, false positives, false negatives) of `detector`."""
    pos = [e for e in examples if e.label]
    neg = [e for e in examples if not e.label]
    fp = [e for e in neg if detector(e.text)]
    fn = [e for e in pos if not detector(e.text)]
    return len(fp) / max(len(neg), 1), len(fn) / max(len(pos), 1), fp, fn


def load_all(name: str) -> list[Example]:
    return split(name, False) + round_one(name) + split(name, True)
