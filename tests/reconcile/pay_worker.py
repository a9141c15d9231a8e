"""``python pay_worker.py URL SAGA_ID POINT``: run the payment agent as SAGA_ID on the store at
URL, stopping at POINT (``$PAY_PARK``, see ``pay_tools``) to be killed. Points in a compensation
make the agent fail after paying."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pay_tools import pay

from sagacity import Sagacity

url, saga_id, point = sys.argv[1:4]
os.environ["PAY_PARK"] = point
os.environ["PAY_SAGA"] = saga_id
with Sagacity(url) as sg:
    sg.run(saga_id, pay, saga_id, fail=point in ("before-refund", "after-refund"))
print("finished without being killed", file=sys.stderr)
sys.exit(3)
