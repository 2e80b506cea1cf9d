"""What a run is asked to do: the run's config as the engine takes it (`run.py`) and the
TOML file that may describe it (`file.py`); each setting's flag, key, check and default are
`backends/settings.py`'s.

Imported at start-up by the CLI and the TUI: nothing here imports aiohttp or the engine.
"""
