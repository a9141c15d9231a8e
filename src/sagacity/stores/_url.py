"""A journal URL fit to show: below the stores, so each can word its messages without importing the
``stores`` package face (which imports the stores themselves)."""

from __future__ import annotations

import re

__all__ = ["safe_url"]


def safe_url(url: str) -> str:
    """The URL with any password replaced by ``***``, for messages and logs."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
