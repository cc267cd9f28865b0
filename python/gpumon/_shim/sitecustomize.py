"""`gpumon run` shim: start the gpumon companion, then run the program's own
sitecustomize (the next one on sys.path), so both keep working."""

import os
import sys


def _gpumon_boot():
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.version_info >= (3, 9) and os.environ.get("GPUMON_DISABLE") != "1":
        try:
            import gpumon
            from gpumon import _helpers

            # Helpers (DataLoader and compile workers, the torchrun launcher) get a companion
            # only once they use CUDA themselves; see gpumon/_helpers.py.
            if _helpers.helper_kind(_helpers.command_line()) is None:
                gpumon.start()
            else:
                _helpers.start_when_cuda_is_used(gpumon.start)
        except Exception as e:
            sys.stderr.write("gpumon: companion not started: %r\n" % (e,))
    _chain(here)


def _chain(here):
    import importlib.machinery
    import importlib.util

    rest = []
    for p in sys.path:
        try:
            if os.path.realpath(p or os.getcwd()) == here:
                continue
        except (OSError, ValueError):
            pass
        rest.append(p)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    # `import sitecustomize` elsewhere gets the program's own module.
    sys.modules["sitecustomize"] = mod
    # Errors propagate to site.py, which reports them exactly as without gpumon.
    spec.loader.exec_module(mod)


_gpumon_boot()
