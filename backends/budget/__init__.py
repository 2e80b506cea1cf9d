"""Budgets: when a dataset may send one more request, and when it is done.

`rules.py` holds the modes and the arithmetic every caller uses; `lengths.py` the answer
length estimates they rest on; `precise.py` the precise mode's own rule. Nothing here does
I/O: the engine and the views feed it counts.
"""
