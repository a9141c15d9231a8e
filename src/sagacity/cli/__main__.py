"""``python -m sagacity.cli``."""

from sagacity.cli._app import main

main()
