"""Plain-asyncio parts of gen-tui: the engine, the simulator, file formats and process control.

Nothing here imports Textual, so `gen-tui run`, the benchmarks and the tests use it alone.
"""
