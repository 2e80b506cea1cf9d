"""Exit codes of every gen-tui command, in one place.

2 means nothing ran because what was asked cannot be run as given (argparse's own usage
errors, a bad flag value, a config file that does not parse, no datasets); 1 means a run
started and failed; 130 is a run stopped by a signal before it finished (as shells count it).
"""

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_ABORTED = 130
