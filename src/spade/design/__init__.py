"""Design end to end: request, sample, extract, check, review, archive and hint one regeneration.

:func:`build` resolves a run's settings once into a :class:`DesignPhase`, whose :meth:`~DesignPhase.run` the
self-play mode calls once per regeneration. Its steps, a module each: what to design
(:mod:`~spade.design.request`), the design call (:mod:`~spade.design.designer`, with the ``lines`` edit
format in :mod:`~spade.design.edits`), the checks (:mod:`~spade.design.check`), and the hints
(:mod:`~spade.design.hints`); :mod:`~spade.design.phase` runs them and :mod:`~spade.design.samples` keeps
the designer samples awaiting credit. Replies are read by :mod:`spade.replies`.
"""

from spade.design.phase import DesignOutcome, DesignPhase, build

__all__ = ["DesignOutcome", "DesignPhase", "build"]
