"""What a run is asked to do: the run's config as the engine takes it (`run.py`), the TOML
file that may describe it (`file.py`), and what it may be asked while it runs (`commands.py`:
stop, pause, a new budget); each setting's flag, key, check and default are
`backends/settings.py`'s.

Imported at start-up by the CLI and the TUI: nothing here imports aiohttp or the engine.
"""
