"""What lets the suite run as one pytest run as well as stage by stage
(scripts/suite.py): test modules are imported by their basename (the tiers are
directories, not packages), so two of one name in two tiers stop `pytest tests`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name() -> None:
    places = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "__pycache__" not in path.parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    assert {name: found for name, found in places.items() if len(found) > 1} == {}
