"""The checkout's commands as a user types them, in a shell where no virtual environment
is active: bin/council, bin/council-worker and bin/council-web run the CLI, the worker
and the page in the checkout's .venv (making it with `make install` when a fresh clone
has none), and `python starter.py` (worker.py, `python -m web`, up.py, demo.py) run by a
Python that lacks Council's packages ends in one line that names the fix, exit status 2.

Each launcher runs from a copy of the checkout. Its .venv is a real virtual environment
that sees this one's packages through a .pth file, stamped as `make install` stamps it,
so that nothing is installed from the network; a fresh clone's runs `make install` for
real, with requirements that name nothing to install.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from council.models import DeliberationRecord
from harness.processes import ROOT
from tests.temporal_fixtures import Council

LEFT_OUT = (".venv", ".venv-real", ".git", "data", "tests", "bench", "__pycache__")
# The interpreter this environment was made from, without its site-packages (-S): a
# Python that has none of Council's packages, wherever the suite runs.
BARE_PYTHON = [
    str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"),
    "-S",
]


def outside_any_venv(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment as a fresh shell's: no venv active, its bin/ off PATH."""
    ours = Path(sys.executable).parent
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and Path(p) != ours]
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return {**clean, "PATH": os.pathsep.join(path), **(env or {})}


def checkout_copy(where: Path) -> Path:
    copy = where / "council-checkout"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    return copy


def venv_with_our_packages(copy: Path) -> None:
    """The copy's .venv: made without pip, its site-packages naming ours in a .pth file,
    and stamped as complete (after the requirements were copied, as make's rule wants)."""
    venv = copy / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "council-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (venv / ".installed").touch()


async def run(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float = 120
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_launchers_run_the_commands_in_the_checkouts_environment(
    tmp_path: Path, council: Council, cli_env: dict[str, str]
) -> None:
    copy = checkout_copy(tmp_path)
    venv_with_our_packages(copy)
    env = outside_any_venv()
    for launcher, usage in (
        ("bin/council", "usage: bin/council [-h]"),
        ("bin/council-worker", "usage: bin/council-worker [-h] [--processes N]"),
        ("bin/council-web", "usage: bin/council-web [-h] [--host HOST]"),
    ):
        code, out, err = await run([launcher, "--help"], copy, env)
        assert code == 0 and out.startswith(usage), (out, err)

    # A real command, on the test's server and worker: the record on stdout, as `council
    # start --wait --json` prints it.
    question = "Does a launcher need its own virtual environment?"
    code, out, err = await run(
        ["bin/council", "start", question, "--max-rounds", "1", "--wait", "--json"],
        copy,
        outside_any_venv(cli_env),
    )
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    assert record.query == question and record.stage3 is not None
    assert "started" in err and "✔ finished" in err


async def test_a_fresh_clone_makes_its_environment_on_first_use(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    copy = checkout_copy(tmp_path)
    # Nothing to install (no network): make install makes .venv and stamps it.
    (copy / "requirements-dev.txt").write_text("# nothing, for the test\n")
    code, out, err = await run(
        [*BARE_PYTHON[:1], "bin/council", "--help"], copy, outside_any_venv(), timeout=300
    )
    assert (copy / ".venv" / ".installed").is_file() and (
        copy / ".venv" / "bin" / "python"
    ).exists()
    lines = err.splitlines()
    assert lines[0] == "council: setting up .venv with make install (the first time: a few minutes)"
    # The command then ran in the new .venv, which lacks the packages (none were installed).
    assert (code, out) == (2, "")
    assert lines[-1].startswith("council: .venv lacks Council's packages (")
    assert lines[-1].endswith("): run make install")


@pytest.mark.parametrize(
    ("command", "named", "fix"),
    [
        (["starter.py", "start", "Why?"], "starter.py", "bin/council"),
        (["worker.py"], "worker.py", "bin/council-worker"),
        (["-m", "web", "--port", "1"], "python -m web", "bin/council-web"),
        (["up.py"], "up.py", "make up"),
        (["demo.py"], "demo.py", "make demo"),
    ],
)
def test_a_python_without_the_packages_is_told_the_fix_in_one_line(
    command: list[str], named: str, fix: str
) -> None:
    done = subprocess.run(
        [*BARE_PYTHON, *command],
        cwd=ROOT,
        env=outside_any_venv(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"{named}: {BARE_PYTHON[0]} lacks Council's packages (")
    assert done.stderr.endswith(
        f"): run {fix} instead, which sets up the checkout's .venv and runs in it\n"
    )
