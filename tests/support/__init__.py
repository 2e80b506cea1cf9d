"""Helpers the tests share, imported as `tests.support.NAME`; fixtures live in conftest.py.

KINDS names the folders of tests/, one per kind of test, each also a pytest marker.
"""

KINDS = ("unit", "integration", "tui", "chaos")
