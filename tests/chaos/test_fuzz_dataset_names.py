"""Fuzz dataset names (they become folder names and shell arguments on the GPU box): exactly
the safe ones are accepted, here and by the remote watcher, and a refusal quotes the name.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

from hypothesis import given

from gen_tui.backends import watcher
from gen_tui.backends.store.prompts import DatasetNameError, check_dataset_name

from .conftest import Examples
from .fuzzing import hostile_names
from .oracle import dataset_name_ok


@given(hostile_names)
def test_dataset_names_are_exactly_the_safe_ones(examples: Examples, name: str) -> None:
    examples()
    accepted = True
    try:
        check_dataset_name(name)
    except DatasetNameError as exc:
        accepted = False
        assert repr(name) in str(exc)
    assert accepted == dataset_name_ok(name), f"{name!r}: accepted={accepted}"
    # The remote watcher checks names again on the GPU box, by the same rule.
    try:
        watcher.parse_dataset_arg("/tmp", name)
        remote = True
    except ValueError:
        remote = False
    assert remote == dataset_name_ok(name), f"watcher: {name!r}: accepted={remote}"
