"""asyncssh's import warning, silenced before any module of this package imports it.

cryptography 51 deprecates DSA, and asyncssh 2.24 names its DSA classes as it is imported:
six lines of CryptographyDeprecationWarning on the stderr of every gen-tui command that
reaches SSH code (`gen-tui servers` with a bad recipe said them before its one line).
Only that warning, only from asyncssh's modules: any other still shows.
"""

from __future__ import annotations

import warnings

warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")
