"""The budget-aware generation engine, in parts a newcomer can find by name.

- `core.Engine`: the façade (`run`, `request_stop`, `set_paused`, `set_budget`, ...)
- `scheduler`: which dataset a free slot goes to; `slots`: the pool and its AIMD limit
- `allocator`: the total budget's split; `dataset`: one dataset's tally, queue and state
- `runner`: servers, retries, backoff; `sink`: records, errors and progress on disk
- `feeder`: prompts read and tokenized; `cost`: prices and `max_cost`
- `checks`: what a client's answer must be to become a record
"""

from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError
from gen_tui.backends.engine.checks import check_generation, receive
from gen_tui.backends.engine.core import Engine

__all__ = [
    "DatasetSpec",
    "Engine",
    "EngineConfig",
    "EngineError",
    "check_generation",
    "receive",
]
