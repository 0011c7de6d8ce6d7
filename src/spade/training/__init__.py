"""The trainer side: the torch Trainer, the GRPO loss, the supervised warm start and multi-process training."""
