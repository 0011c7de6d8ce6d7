"""The scripted test double of a model: a Policy that answers every prompt from the environments' own
solutions and the designer's seed games (:mod:`~spade.scripted.policy`, its line edits in
:mod:`~spade.scripted.lines`), and the Trainer that updates it (:mod:`~spade.scripted.trainer`). It sits above
the designer, whose prompts it answers; the backend registry names it like any engine."""
