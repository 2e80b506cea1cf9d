"""A config's servers wired for one gen-tui process: their hosts, launchers, URLs and state
file, for the panel's servers (app/served.py) and `gen-tui servers` (app/cli/servers.py)
alike: one place that knows which launcher serves which kind of recipe."""

from __future__ import annotations

from pathlib import Path

from gen_tui.backends.config.file import FileConfig
from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.hosts import Host, LocalHost, open_host
from gen_tui.backends.servers.launcher import Launcher
from gen_tui.backends.servers.process import REMOTE_FOLDER, ProcessLauncher
from gen_tui.backends.servers.slurm_launcher import SlurmLauncher
from gen_tui.backends.servers.state import StateFile, local_folder


class ServerSetup:
    """The hosts, launchers and URLs of `config`'s `[[servers]]` and `[router]`; `folder`
    holds this machine's state file, logs and start guard (default: :func:`local_folder`)."""

    def __init__(self, config: FileConfig, folder: Path | None = None) -> None:
        self.config = config
        folder = folder or local_folder()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # the start guard's folder
        self.folder = folder
        self.state = StateFile(folder)
        self.recipes: list[ServerRecipe] = [
            *config.servers,
            *([config.router] if config.router else []),
        ]
        hosts: dict[str, Host] = {"local": LocalHost(folder)}
        for entry in config.hosts:
            if any(recipe.host == entry.name for recipe in self.recipes):
                hosts[entry.name] = open_host(entry.target, REMOTE_FOLDER, name=entry.name)
        self.hosts = hosts
        self.launchers: dict[str, Launcher] = {
            "process": ProcessLauncher(hosts, str(folder), self.state),
            "slurm": SlurmLauncher(hosts, str(folder), self.state, self.recipes),
        }
        self.urls = {recipe.name: config.server_url(recipe) for recipe in self.recipes}

    def unsupported(self) -> str | None:
        """One line naming a recipe whose launcher is not wired here, else None."""
        for recipe in self.recipes:
            if recipe.launcher not in self.launchers:
                return f"server {recipe.name}: launcher {recipe.launcher} is not available yet"
        return None

    async def close(self) -> None:
        for host in self.hosts.values():
            await host.close()
