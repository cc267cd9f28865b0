"""`python -m gpumon ARGS`: the `gpumon` command the wheel installs, for notebooks
(`!python -m gpumon ...`) and for virtual environments whose bin/ is not on PATH.

The wheel ships the binary as a script (maturin's `bin` bindings), so it sits in the
scripts directory of whichever scheme pip installed into, as ruff and uv find theirs.
"""

import os
import sys
import sysconfig


def find_gpumon_bin():
    """The installed `gpumon` binary: the scripts directory of this interpreter's
    install scheme, then of the user scheme (`pip install --user`), then the one
    next to this package for `pip install --target`."""
    exe = "gpumon" + (sysconfig.get_config_var("EXE") or "")
    candidates = [os.path.join(sysconfig.get_path("scripts"), exe)]
    user_scheme = None
    if hasattr(sysconfig, "get_preferred_scheme"):
        user_scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "posix":
        user_scheme = "posix_user"
    if user_scheme:
        try:
            candidates.append(os.path.join(sysconfig.get_path("scripts", scheme=user_scheme), exe))
        except KeyError:
            pass
    # `pip install --target DIR` puts the package in DIR and the scripts in DIR/bin.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates.append(os.path.join(pkg_parent, "bin", exe))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "the gpumon binary is not installed beside this package (looked in: %s); "
        "install the gpumon-memory wheel, or build it with `cargo install --path .`"
        % ", ".join(candidates)
    )


def main():
    try:
        path = find_gpumon_bin()
    except FileNotFoundError as e:
        sys.stderr.write("gpumon: %s\n" % e)
        return 1
    argv = [path] + sys.argv[1:]
    # exec: signals, exit status and the terminal belong to the binary, as with `gpumon`.
    os.execv(path, argv)


if __name__ == "__main__":
    sys.exit(main())
