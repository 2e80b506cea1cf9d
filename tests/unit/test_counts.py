import pytest

from gen_tui.backends.figures import CountError, format_count, parse_count


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10M", 10_000_000),
        ("10m", 10_000_000),
        ("2.5e6", 2_500_000),
        ("500k", 500_000),
        ("500K", 500_000),
        ("10_000_000", 10_000_000),
        ("1.5k", 1500),
        ("92M", 92_000_000),
        ("1G", 1_000_000_000),
        (" 7 ", 7),
        ("0", 0),
        (42, 42),
    ],
)
def test_accepts(text: str | int, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "-5",
        "1.0001k",
        "1e-3",
        "10MM",
        "_10",
        "1__0",
        "10 M M",
        "nan",
        "inf",
        "0x10",
        True,
        3.5,
        -1,
    ],
)
def test_refuses(text: object) -> None:
    with pytest.raises(CountError):
        parse_count(text)  # type: ignore[arg-type]


def test_error_names_the_field() -> None:
    with pytest.raises(CountError, match="--max-samples"):
        parse_count("lots", what="--max-samples")


def test_format() -> None:
    assert format_count(10_000_000) == "10M"
    assert format_count(9_870_000) == "9.87M"
    assert format_count(512_000) == "512k"
    assert format_count(950) == "950"


@pytest.mark.parametrize("text", ["-5", " -10M", "-0"])
def test_a_negative_count_is_called_negative_not_a_non_number(text: str) -> None:
    with pytest.raises(CountError, match="is negative; it must be a positive count"):
        parse_count(text, what="--max-tokens-per-dataset")
