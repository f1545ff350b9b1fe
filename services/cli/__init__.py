"""The `workbench` command line: groups of noun/verb commands whose bodies only call services."""

from services.cli import answers, calibration, corpus, demo, intake, judge, retention, serve  # noqa: F401  (importing a module registers its commands)
from services.cli._app import app

__all__ = ["app"]
