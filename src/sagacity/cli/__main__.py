"""``python -m sagacity.cli``."""

from sagacity.cli import main

main()
