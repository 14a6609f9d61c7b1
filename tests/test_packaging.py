"""The project installs as a package (`pip install .`) with requirements.txt's pins."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from harness.processes import ROOT

PACKAGES = (
    "activities",
    "app",
    "council",
    "doctor",
    "evaluation",
    "grading",
    "harness",
    "mcp_server",
    "simulator",
    "web",
    "workflows",
)
LEFT_OUT = (
    ".venv",
    ".git",
    "data",
    "tests",
    "bench",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
)


def pins() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_wheel_holds_the_code_and_declares_the_runtime_dependencies(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("council-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt")))
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata.decode(), re.MULTILINE)
    assert [r.replace(" ", "") for r in requires] == pins()
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names, package
    assert {"worker.py", "starter.py", "demo.py", "workflows/deliberation.py"} <= set(names)
    assert {"web/templates/deliberation.html", "web/static/council.js"} <= set(names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    assert "council = starter:entry" in entry_points.decode()
    # The licence: MIT, declared in the metadata, its text shipped with the wheel.
    assert re.search(r"^License-Expression: MIT$", metadata.decode(), re.MULTILINE)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
