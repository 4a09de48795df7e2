"""The architecture's import contracts ([tool.importlinter] in pyproject.toml) hold on the tree,
and do catch a forbidden import: the same contracts run on a copy of the packages with one
import added that the kernel contract forbids."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with ``where``'s pyproject.toml, finding the packages in ``where``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=where,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(where)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def contracts() -> list[dict[str, Any]]:
    return list(config()["contracts"])


def copy_of_the_packages(into: Path) -> Path:
    for package in config()["root_packages"]:
        shutil.copytree(
            ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


def test_the_import_contracts_hold_on_the_tree() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in result.stdout


def test_a_runtime_module_importing_a_feature_app_breaks_the_kernel_contract(
    tmp_path: Path,
) -> None:
    tree = copy_of_the_packages(tmp_path)
    assert lint_imports(tree).returncode == 0  # the copy is as good as the tree
    (tree / "agents" / "runtime" / "shortcut.py").write_text(
        '"""A runtime module that asks approvals directly."""\n\nimport approvals.models\n'
    )
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "The runtime kernel imports no feature app" in result.stdout
    assert "BROKEN" in result.stdout
    assert "agents.runtime.shortcut -> approvals.models" in result.stdout
    # That contract and the layers' (the runtime sits below the features); the others hold.
    assert f"Contracts: {len(contracts()) - 2} kept, 2 broken." in result.stdout
    assert "The layers, each importing only those below it" in result.stdout
