"""A `[[hosts]]` entry's `servers`: plain http(s) URLs, a bounded few, each once; a bad one
is one line naming the file and the field; and they reach the host's monitor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gen_tui.app.host_sources import sources_from_config
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.telemetry.server_url import MAX_HOST_SERVERS


def _load(tmp_path: Path, servers: str) -> Path:
    path = tmp_path / "gen-tui.toml"
    path.write_text(f'[[hosts]]\nname = "box"\ntarget = "box"\noutput_dir = "/o"\n{servers}\n')
    return path


def test_servers_are_read_normalised_and_passed_to_the_source(tmp_path: Path) -> None:
    path = _load(
        tmp_path,
        'servers = ["http://127.0.0.1:30000/", "https://gpu-box:8000/v1", '
        '"http://127.0.0.1:30000"]',
    )
    (entry,) = load_config(path).hosts
    assert entry.servers == ("http://127.0.0.1:30000", "https://gpu-box:8000/v1")
    (source,) = sources_from_config([entry])
    assert source.servers == entry.servers and source.remote


def test_no_servers_is_none(tmp_path: Path) -> None:
    (entry,) = load_config(_load(tmp_path, "")).hosts
    assert entry.servers == ()
    assert sources_from_config([entry])[0].servers == ()


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ('servers = "http://a:1"', "hosts[0].servers has the wrong type (str)"),
        ('servers = ["file:///etc/passwd"]', "hosts[0].servers[0] 'file:///etc/passwd' is not"),
        ('servers = ["http://a:1", 30000]', "hosts[0].servers[1] 30000 is not a plain http(s)"),
        ('servers = ["http://a:1/m?x=1"]', "hosts[0].servers[0]"),
        ('servers = ["http://user:pw@a:1"]', "hosts[0].servers[0]"),
        ('servers = ["http://a:1/\\u001b[31m"]', "hosts[0].servers[0] 'http://a:1/\\x1b[31m'"),
    ],
)
def test_a_bad_server_is_one_line_naming_file_and_field(
    tmp_path: Path, servers: str, message: str
) -> None:
    path = _load(tmp_path, servers)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text and "\x1b" not in text
    assert message in text, text


def test_the_count_is_bounded(tmp_path: Path) -> None:
    urls = ", ".join(f'"http://10.0.0.{i}:30000"' for i in range(MAX_HOST_SERVERS + 1))
    with pytest.raises(
        ConfigError, match=re.escape(f"hosts[0].servers lists {MAX_HOST_SERVERS + 1}")
    ):
        load_config(_load(tmp_path, f"servers = [{urls}]"))
    urls = ", ".join(f'"http://10.0.0.{i}:30000"' for i in range(MAX_HOST_SERVERS))
    assert len(load_config(_load(tmp_path, f"servers = [{urls}]")).hosts[0].servers) == 16
