"""The dashboard screen and the panel sources it reads from (see `sources`)."""
