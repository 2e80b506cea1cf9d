"""`[[servers]]` and `[router]` recipes (issue 32): read with their defaults, a bad one is
one line naming the file, the recipe and the field, and a run may name a server by recipe."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gen_tui.backends.config.file import ConfigError, FileConfig, load_config, merge_run
from gen_tui.backends.config.server_recipe import (
    DEFAULT_HEALTH,
    DEFAULT_MAX_RESTARTS,
    RestartPolicy,
    router_argv,
)

HOSTS = '[[hosts]]\nname = "box"\ntarget = "me@gpu-box.lan:2222"\noutput_dir = "/o"\n'
SERVER = (
    '[[servers]]\nname = "gpu0"\nargv = ["python", "-m", "sglang.launch_server"]\nport = 30000\n'
)


def _load(tmp_path: Path, text: str) -> FileConfig:
    path = tmp_path / "gen-tui.toml"
    path.write_text(text)
    return load_config(path)


def test_a_recipe_with_its_defaults_and_the_router(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        HOSTS
        + SERVER
        + '[[servers]]\nname = "gpu1"\nhost = "box"\nargv = ["serve"]\nport = 30001\n'
        'env = { CUDA_VISIBLE_DEVICES = "1" }\nmax_restarts_per_hour = 2\nbackoff_s = 1\n'
        '[router]\nargv = ["router", "--worker-urls", "{workers}"]\nport = 31000\n',
    )
    gpu0, gpu1 = config.servers
    assert gpu0.host == "local" and gpu0.launcher == "process" and gpu0.health == DEFAULT_HEALTH
    assert gpu0.restart.max_per_hour == DEFAULT_MAX_RESTARTS
    assert gpu1.environment == {"CUDA_VISIBLE_DEVICES": "1"}
    assert gpu1.restart == RestartPolicy(2, 1.0, gpu1.restart.backoff_max_s)
    assert config.server_url(gpu0) == "http://127.0.0.1:30000"
    assert config.server_url(gpu1) == "http://gpu-box.lan:30001"  # the host's machine
    assert config.router is not None and config.router.name == "router"
    assert router_argv(config.router, ["http://a:1", "http://b:2"]) == [
        "router",
        "--worker-urls",
        "http://a:1",
        "http://b:2",
    ]


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RestartPolicy(5, 2.0, 10.0)
    assert [policy.delay(n) for n in range(4)] == [2.0, 4.0, 8.0, 10.0]


def test_a_run_names_servers_by_recipe(tmp_path: Path, prompts_dir: Callable[..., Path]) -> None:
    config = _load(tmp_path, SERVER + '[router]\nargv = ["r"]\nport = 31000\n')
    run = merge_run(
        config,
        {
            "server_urls": ["gpu0", "router", "http://elsewhere:1"],
            "prompts_dir": prompts_dir(B1=2),
            "api": "openai",
            "model": "m",
        },
    )
    assert run.server_urls == [
        "http://127.0.0.1:30000",
        "http://127.0.0.1:31000",
        "http://elsewhere:1",
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[servers]]\nname = "a"\nport = 1\n', "servers[0] 'a': argv must be"),
        ('[[servers]]\nname = "a"\nargv = []\nport = 1\n', "servers[0] 'a': argv must be"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 70000\n', "servers[0] 'a': port must"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = "1"\n', "servers[0] 'a': port must"),
        ('[[servers]]\nname = "a b"\nargv = ["x"]\nport = 1\n', "servers[0] 'a b': name must"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nhost = "nowhere"\n', "a': host must"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nlauncher = "k8s"\n', "a': launcher"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nenv = { A = 1 }\n', "a': env must"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nhealth = "h"\n', "a': health must"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nbackoff_s = -1\n', "a': backoff_s"),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nprot = 2\n', "unknown key 'prot'"),
        (
            '[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nlauncher = "slurm"\n'
            '[servers.slurm]\npartiton = "gpu"\n',
            "a': unknown slurm key 'partiton' (known: partition, gpus, time)",
        ),
        (
            '[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\n[servers.slurm]\ntime = 90\n',
            "a': slurm.time must be a Slurm time limit as a string",
        ),
        (
            '[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\n[servers.slurm]\ntime = "1h"\n',
            "a': slurm.time must be a Slurm time limit",
        ),
        (
            '[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\n[servers.slurm]\ngpus = -1\n',
            "a': slurm.gpus must be a whole number, 0 or more",
        ),
        (
            '[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\n[servers.slurm]\npartition = "a b"\n',
            "a': slurm.partition must be a partition's name",
        ),
        ('[[servers]]\nname = "a"\nargv = ["x"]\nport = 1\nslurm = 3\n', "a': slurm must be"),
        (SERVER + SERVER, "name 'gpu0' is taken"),
        (SERVER + SERVER.replace("gpu0", "gpu1"), "port 30000 on local is another's"),
        ("[router]\nport = 1\n", "[router]: argv must be"),
        ("servers = 3\n", "servers must be an array"),
    ],
)
def test_a_bad_recipe_is_one_line_naming_it_and_the_field(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "gen-tui.toml"))
    assert said in message


def test_a_slurm_recipe_submits_from_here_or_a_login_node(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        '[[hosts]]\nname = "login"\ntarget = "me@login"\noutput_dir = "/o"\n'
        '[[servers]]\nname = "here"\nargv = ["serve"]\nport = 30000\nlauncher = "slurm"\n'
        '[servers.slurm]\npartition = "gpu"\ngpus = 8\ntime = "4:00:00"\n'
        '[[servers]]\nname = "there"\nargv = ["serve"]\nport = 30000\nhost = "login"\n'
        'launcher = "slurm"\n',
    )
    here, there = config.servers
    assert (here.host, here.launcher) == ("local", "slurm")
    assert dict(here.slurm) == {"partition": "gpu", "gpus": 8, "time": "4:00:00"}
    assert (there.host, there.launcher, there.slurm) == ("login", "slurm", ())
