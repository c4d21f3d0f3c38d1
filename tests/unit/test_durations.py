import pytest

from ansible_operator.values.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300ms", 0.3),
        ("1.5h", 5400.0),
        ("1h30m", 5400.0),
        ("2m30s", 150.0),
        ("10h", 36000.0),
        ("0", 0.0),
        ("0s", 0.0),
        ("1500us", 0.0015),
        ("2µs", 2e-6),
        ("100ns", 1e-7),
        (".5s", 0.5),
    ],
)
def test_parse_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_bare_number_needs_a_unit() -> None:
    with pytest.raises(DurationError, match="'30'"):
        parse_duration("30")
    assert parse_duration("30", bare_number_unit="s") == 30.0
    assert parse_duration("2", bare_number_unit="m") == 120.0


@pytest.mark.parametrize("text", ["", "  ", "abc", "-5s", "5x", "1h-30m", "h", "5 s"])
def test_invalid_durations_name_text_and_accepted_forms(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    message = str(info.value)
    assert repr(text) in message
    assert "invalid duration" in message


def test_error_message_shows_examples() -> None:
    with pytest.raises(DurationError) as info:
        parse_duration("abc")
    assert str(info.value) == (
        "invalid duration 'abc': use a number with a unit, like 30s, 5m or 1h30m "
        "(units: ns, us, ms, s, m, h)"
    )
    assert isinstance(info.value, ValueError)


def test_negative_is_rejected() -> None:
    with pytest.raises(DurationError, match="negative"):
        parse_duration("-1m")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (90, "1m30s"),
        (3600, "1h"),
        (0.5, "500ms"),
        (36000, "10h"),
        (5400, "1h30m"),
        (3605, "1h0m5s"),
        (1.5, "1.5s"),
        (45, "45s"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0.3, 90, 3600, 5400, 36000, 150])
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)
