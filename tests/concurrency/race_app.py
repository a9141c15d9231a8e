"""The approvals API over the race tools, for ``uvicorn race_app:app --workers N``.

The journal URL and effects file come from ``SAGACITY_RACE_URL`` and ``SAGACITY_RACE_EFFECTS``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import race_tools  # noqa: F401 - registers the tools this server resumes and compensates

from sagacity import Sagacity
from sagacity.server import TokenAuth, create_app

TOKENS = {
    "alice-token-0123456789": {"name": "alice@example.com", "roles": ["approver"]},
    "bob-token-0123456789ab": {"name": "bob@example.com", "roles": ["approver"]},
}

app = create_app(Sagacity(os.environ["SAGACITY_RACE_URL"]), auth=TokenAuth(TOKENS))
