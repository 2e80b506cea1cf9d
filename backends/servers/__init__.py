"""Servers gen-tui starts, watches and restarts (issue 32): recipes, launchers, health."""
