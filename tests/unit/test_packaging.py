"""The wheel installs one import name, ``semiactive``: the design's folders
node/, ha/ and coordinator/ at the top of the repository reach it through
the links in semiactive/, and no generic name (``node``, ``ha``, ...) lands
in site-packages beside other distributions' packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.processes import ROOT

# What the build reads: the package (with its links) and what pyproject names.
SOURCES = ("pyproject.toml", "README.md", "semiactive", "node", "ha", "coordinator")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, tree / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, tree],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = Path(out).glob("semiactive-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheels_only_top_level_import_name_is_semiactive(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"semiactive"}
    (top_level,) = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["semiactive"]


def test_the_linked_folders_and_their_data_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for path in (
        "semiactive/node/service/daemon.py",
        "semiactive/node/cql/grammar.lark",
        "semiactive/ha/replica.py",
        "semiactive/coordinator/service.py",
        "semiactive/coordinator/web/index.html",
        "semiactive/wire/dataplane_pb2.pyi",
        "semiactive/launcher/cluster.py",
    ):
        assert path in names, path
    # Every module of the source tree is packaged.
    modules = {
        (Path(directory) / file).relative_to(ROOT).as_posix()
        for directory, _, files in os.walk(ROOT / "semiactive", followlinks=True)
        for file in files
        if file.endswith(".py")
    }
    assert len(modules) > 150
    assert modules - names == set()


def test_the_build_step_that_generates_dashboards_is_not_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    assert not [n for n in wheel.namelist() if "dashboards" in n or "grafana_foundation_sdk" in n]
