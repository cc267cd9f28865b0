"""`python -m gpumon` runs the binary installed beside the package (python/gpumon/__main__.py).
The installed-wheel case runs in scripts/wheel_check.sh; here a venv stands in for the
install, with a stand-in binary in its scripts directory."""

import os
import subprocess
import sys
import venv

import pytest

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fake_bin(path):
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "fake gpumon $*"\nexit 7\n')
    os.chmod(path, 0o755)


def _env(extra_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = extra_path
    env["PATH"] = "/usr/bin:/bin"  # the scripts directory is not on PATH
    return env


def test_runs_the_binary_in_the_interpreters_scripts_dir(tmp_path):
    venv.EnvBuilder(with_pip=False).create(str(tmp_path / "v"))
    _fake_bin(str(tmp_path / "v" / "bin" / "gpumon"))
    out = subprocess.run(
        [str(tmp_path / "v" / "bin" / "python"), "-m", "gpumon", "--version", "x y"],
        env=_env(PKG_PARENT), capture_output=True, text=True, timeout=60)
    assert out.stdout == "fake gpumon --version x y\n"
    assert out.returncode == 7  # the binary's status, unchanged


def test_finds_a_pip_target_install(tmp_path):
    # `pip install --target DIR`: DIR/gpumon and DIR/bin/gpumon.
    target = tmp_path / "t"
    (target / "bin").mkdir(parents=True)
    os.symlink(os.path.join(PKG_PARENT, "gpumon"), str(target / "gpumon"))
    _fake_bin(str(target / "bin" / "gpumon"))
    out = subprocess.run([sys.executable, "-m", "gpumon", "report"], env=_env(str(target)),
                         capture_output=True, text=True, timeout=60)
    assert out.stdout == "fake gpumon report\n"


def test_says_where_it_looked_when_there_is_no_binary(tmp_path):
    venv.EnvBuilder(with_pip=False).create(str(tmp_path / "v"))
    out = subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-m", "gpumon"],
                         env=dict(_env(PKG_PARENT), PYTHONUSERBASE=str(tmp_path / "u")),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "gpumon binary is not installed" in out.stderr
    assert str(tmp_path / "v" / "bin" / "gpumon") in out.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
