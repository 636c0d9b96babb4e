"""Where the tests find TRAJECT-Bench's public data: TOOLSWEEP_TRAJECT_DATA, or
<shared>/datasets/traject_bench with <shared> = TOOLSWEEP_SHARED or ../shared beside the checkout.

Outside CI a missing copy skips these modules; in CI (CI=true) it fails, so the benchmark is never
silently untested."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DATA = Path(
    os.environ.get("TOOLSWEEP_TRAJECT_DATA")
    or Path(os.environ.get("TOOLSWEEP_SHARED", REPO / ".." / "shared")) / "datasets" / "traject_bench"
)


def require_data() -> Path:
    if not (DATA / "tools").is_dir():
        message = f"TRAJECT-Bench data not found at {DATA} (set TOOLSWEEP_TRAJECT_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    return DATA
