"""Training from Python: :func:`train` runs the SPADE loop (:mod:`spade.run.loop`) on a config."""

from spade.run.loop import train

__all__ = ["train"]
