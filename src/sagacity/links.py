"""The formats of approval messages, for those who send their own: the signed email link and the
Slack buttons (docs/approvals-from-messages.md). The server reads both back; ``_links`` has them,
and this module hands on its names."""

from __future__ import annotations

import sagacity._links as _links
from sagacity._links import *  # noqa: F403 - the public face of exactly what _links lists

__all__ = _links.__all__
