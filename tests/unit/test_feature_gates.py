"""`cluster up --feature-gates`: Kubernetes' syntax, and a bad pair named
before any process starts."""

from __future__ import annotations

import pytest

from ansible_operator.cli import build_parser
from ansible_operator.cluster.local import format_feature_gates, parse_feature_gates


def test_pairs_parse_as_kubernetes_takes_them() -> None:
    assert parse_feature_gates("ShardedListAndWatch=true") == {"ShardedListAndWatch": True}
    assert parse_feature_gates(" A=true, B=False ,C=0,") == {"A": True, "B": False, "C": False}
    assert parse_feature_gates("") == {}


def test_the_argument_is_sorted_so_the_same_gates_make_the_same_flag() -> None:
    assert format_feature_gates({"B": False, "A": True}) == "A=true,B=false"


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("Bad", "'Bad'"),
        ("A=true,Bad", "'Bad'"),
        ("A=yes", "'A=yes'"),
        ("=true", "'=true'"),
        ("Not-A-Name=true", "'Not-A-Name=true'"),
    ],
)
def test_a_bad_pair_is_named(text: str, bad: str) -> None:
    with pytest.raises(ValueError, match=f"feature gate {bad} is not Name=true or Name=false"):
        parse_feature_gates(text)


def test_a_gate_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'A' is given twice"):
        parse_feature_gates("A=true,A=false")


def test_cluster_up_refuses_a_bad_pair_with_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["cluster", "up", "--feature-gates", "Bad"])

    assert exit_info.value.code == 2
    assert "argument --feature-gates: feature gate 'Bad' is not Name=true" in (
        capsys.readouterr().err
    )


def test_cluster_up_merges_repeated_flags() -> None:
    args = build_parser().parse_args(
        ["cluster", "up", "--feature-gates", "A=true,B=true", "--feature-gates", "B=false"]
    )

    assert args.feature_gates == {"A": True, "B": False}
    assert build_parser().parse_args(["cluster", "up"]).feature_gates == {}
