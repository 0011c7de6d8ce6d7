"""spade: self-play RL in adaptive synthetic executable environments (SPADE)."""

__version__ = "0.1.0"
