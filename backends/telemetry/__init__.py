"""Telemetry of the machine a run pays for: its inference servers' load (`metrics`)."""
