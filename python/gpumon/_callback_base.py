"""The base class a framework checks callbacks against, from whichever of its packages
the program already imported (else whichever is installed, else `object`), so each
callback module imports without the framework installed."""

import sys


def callback_base(preferred: str, alternative: str, imported_marker: str, preferred_marker: str) -> type:
    """`preferred` and `alternative` are package names holding `.callbacks.Callback`; the
    alternative goes first when `imported_marker` is imported and `preferred_marker` is not."""
    order = [preferred, alternative]
    if imported_marker in sys.modules and preferred_marker not in sys.modules:
        order.reverse()
    for name in order:
        try:
            return __import__(name + ".callbacks", fromlist=["Callback"]).Callback
        except Exception:
            continue
    return object


def start_given(**options: object) -> None:
    """`gpumon.start` with the options a callback was given; None keeps the default (or
    the GPUMON_* environment variable). One place for the three callbacks' constructors."""
    import gpumon

    gpumon.start(**{k: v for k, v in options.items() if v is not None})
