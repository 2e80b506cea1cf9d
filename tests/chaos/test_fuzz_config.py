"""Fuzz the TOML config: random keys, types and values (NUL, `~`, hostile names) and byte
damage either load into sane settings or raise a ConfigError naming the file and the key.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from gen_tui.backends.config.file import ConfigError, load_config

from .conftest import Examples
from .fuzzing import hostile_names, mutate, timed
from .oracle import dataset_name_ok


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if not isinstance(value, float) or value == value else "nan"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (\uXXXX escapes)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(value)


config_values = st.one_of(
    st.integers(-5, 10**7),
    st.floats(-1, 1e6, allow_nan=False),
    st.booleans(),
    st.sampled_from(["10M", "2.5e6", "x", "", "predictive", "strict", "sglang", "a\x00b", "~"]),
    st.text(max_size=10),
    st.lists(st.one_of(st.integers(0, 9), st.text(max_size=5)), max_size=3),
)
run_keys = st.sampled_from(
    [
        "server_urls", "tokenizer", "output_dir", "prompts_dir", "concurrency", "budget_mode",
        "max_tokens_per_dataset", "max_samples", "max_total_tokens", "parallel_datasets", "api",
        "price_per_million", "max_cost", "stream", "grace", "max_retries", "bogus",
    ]
)  # fmt: skip


@st.composite
def config_docs(draw: st.DrawFn) -> str:
    lines = ["[run]"]
    for key, value in draw(st.dictionaries(run_keys, config_values, max_size=5)).items():
        lines.append(f"{key} = {toml_value(value)}")
    lines.append("[sampling]")
    sampling_keys = st.sampled_from(["max_new_tokens", "temperature", "stop", "top_k", "nope"])
    for key, value in draw(st.dictionaries(sampling_keys, config_values, max_size=3)).items():
        lines.append(f"{key} = {toml_value(value)}")
    for _ in range(draw(st.integers(0, 3))):
        lines.append("[[datasets]]")
        entry = {
            "name": draw(st.one_of(hostile_names, st.sampled_from(["B1", "B2"]))),
            "prompts": draw(st.sampled_from(["p/B1.jsonl", "a\x00b", "~/x", "../../x"])),
        }
        extra_keys = st.sampled_from(["max_tokens", "max_samples", "weight", "oops"])
        entry.update(draw(st.dictionaries(extra_keys, config_values, max_size=2)))
        for key, value in entry.items():
            if draw(st.integers(0, 9)):
                lines.append(f"{key} = {toml_value(value)}")
    if draw(st.booleans()):
        lines.append("[[hosts]]")
        host_name = draw(st.sampled_from(["gpu", "a b", "x"]))
        host_out = draw(st.sampled_from(["/o", "a\x00", "~"]))
        lines.append(f"name = {toml_value(host_name)}")
        lines.append(f"output_dir = {toml_value(host_out)}")
        if draw(st.booleans()):
            lines.append(f"command = {toml_value(draw(config_values))}")
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 4)) == 0:
        text = mutate(text.encode(), draw).decode("utf-8", "replace")
    return text


@given(config_docs())
def test_config_loads_or_names_the_file_and_key(examples: Examples, doc: str) -> None:
    examples()
    note(doc)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gen-tui.toml"
        path.write_text(doc, encoding="utf-8")
        try:
            config = timed(load_config, path)
        except ConfigError as exc:
            assert str(exc).startswith((f"{path}: ", f"cannot read config {path}")), exc
            return
    for entry in config.datasets:
        assert dataset_name_ok(entry.name)
        assert entry.weight > 0
    for key in ("concurrency", "max_tokens_per_dataset", "max_samples", "max_total_tokens"):
        value = config.run.get(key)
        assert value is None or (isinstance(value, int) and value >= 0), (key, value)
