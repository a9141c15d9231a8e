"""``python reconcile_worker.py URL``: one operator's ``reconcile`` in a process of its own; prints
what it did as JSON lines (saga, seq, answer, settled)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pay_tools  # noqa: F401  (its tools and reconcilers)

from sagacity import Sagacity

with Sagacity(sys.argv[1]) as sg:
    for r in sg.reconcile(timeout=60):
        print(json.dumps({"saga": r.saga_id, "seq": r.seq, "answer": r.answer, "settled": r.settled}))
