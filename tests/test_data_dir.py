"""DATA, where Council keeps what it stores (app.store.data_dir): COUNCIL_DATA when set, else the
checkout's data/ in a checkout, else (installed: no checkout around the packages) the
user's data directory, never site-packages."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from platformdirs import user_data_path

from app.settings.environment import Settings
from app.store import data_dir, store
from harness.processes import ROOT

pytestmark = pytest.mark.fast


@pytest.fixture
def user_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's data directory, moved where the test can see it (XDG_DATA_HOME: Linux)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    return user_data_path("council", appauthor=False)


def test_a_checkout_keeps_its_data_in_its_data_folder(user_data: Path) -> None:
    assert data_dir.in_checkout()
    assert Settings.read({}).data() == ROOT / "data"
    assert store.location(Settings.read({})).path == ROOT / "data" / "store"


def test_an_installed_council_keeps_its_data_in_the_users_data_directory(
    tmp_path: Path, user_data: Path
) -> None:
    # The module as a wheel installs it: in site-packages, with no checkout beside it.
    site = tmp_path / "site-packages"
    (site / "app/store").mkdir(parents=True)
    shutil.copy(ROOT / "app/store/data_dir.py", site / "app/store/data_dir.py")
    spec = importlib.util.spec_from_file_location("installed", site / "app/store/data_dir.py")
    assert spec is not None and spec.loader is not None
    installed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installed)
    assert not installed.in_checkout()
    assert installed.default_data() == user_data
    assert user_data.name == "council" and not user_data.is_relative_to(site)


def test_the_settings_take_the_installed_default_and_council_data_over_it(
    tmp_path: Path, user_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_dir, "ROOT", tmp_path / "site-packages")
    assert Settings.read({}).data() == user_data
    assert store.location(Settings.read({})).path == user_data / "store"
    chosen = tmp_path / "chosen"
    for checkout in (False, True):
        if checkout:
            monkeypatch.setattr(data_dir, "ROOT", ROOT)
        settings = Settings.read({"COUNCIL_DATA": str(chosen)})
        assert settings.data() == chosen
        assert store.location(settings).path == chosen / "store"
