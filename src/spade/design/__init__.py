"""Design end to end: request, sample, extract, check, review, archive and hint one regeneration.

The training loop calls :func:`design_phase` once per regeneration. Its steps, a module each: what to
design (:mod:`~spade.design.request`), the design call (:mod:`~spade.design.designer`, with the ``lines``
edit format in :mod:`~spade.design.edits`), the checks (:mod:`~spade.design.check`), and the hints
(:mod:`~spade.design.hints`); :mod:`~spade.design.phase` runs them. Replies are read by :mod:`spade.replies`.
"""

from spade.design.phase import DesignOutcome, design_phase, fresh_only

__all__ = ["DesignOutcome", "design_phase", "fresh_only"]
