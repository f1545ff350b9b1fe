"""The import-linter contracts in pyproject.toml bite: an upward import in a copy of the tree
breaks the layers contract by name, the unmodified copy keeps it, and every group of services
sits in a layer (a group left out would never be checked)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app_pages", "api", "services", "db")
LAYERS = "Imports go one way down the layers"


def _config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]


def _python_only(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or (Path(folder, n).is_file() and not n.endswith(".py"))}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The source packages and pyproject.toml, copied: lint-imports run there reads the copy
    (it puts its working directory first on sys.path, ahead of the editable install)."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=_python_only)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
               "--no-cache"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_layers_contract_is_kept_on_the_tree_as_it_is(tree: Path) -> None:
    result = _lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{LAYERS} KEPT" in result.stdout
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "upward", "lower", "higher"), [
    # The blend's weights lived with the router; tuning (a part) read them from an orchestrator.
    ("services/scoring/tuning.py", "services.answering.decisions", "services.scoring", "services.answering"),
    # The judge gets model verdicts passed in; it never reaches into answering for them.
    ("services/judging/__init__.py", "services.answering.llm.base", "services.judging", "services.answering"),
    # Review reads run statuses from services.domain, not from the pipeline's runs module.
    ("services/review/queue.py", "services.answering.runs", "services.review", "services.answering"),
])
def test_an_upward_import_breaks_the_layers_contract_by_name(tree: Path, module: str, upward: str, lower: str,
                                                             higher: str) -> None:
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\nimport {upward}  # noqa: E402,F401\n", encoding="utf-8")
    importer = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")

    result = _lint_imports(tree)

    assert result.returncode != 0, result.stdout
    assert f"{LAYERS} BROKEN" in result.stdout
    assert f"{lower} is not allowed to import {higher}" in result.stdout
    assert f"{importer} -> {upward}" in result.stdout


def test_every_group_of_services_sits_in_a_layer() -> None:
    layers = next(c for c in _config()["contracts"] if c["name"] == LAYERS)["layers"]
    named = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    groups = {f"services.{p.parent.name}" for p in (ROOT / "services").glob("*/__init__.py")}
    modules = {f"services.{p.stem}" for p in (ROOT / "services").glob("*.py") if p.stem != "__init__"}
    assert groups and modules
    assert (groups | modules) - named == set(), "add these to a layer in [tool.importlinter] of pyproject.toml"
