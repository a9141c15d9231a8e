"""The MCP gateway tests: their helpers (``mcp_tools``) import by name from this directory.

Every module that needs the ``mcp`` extra starts with ``pytest.importorskip("mcp", ...)``, so
without the extra they are skipped with a message saying what to install.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
