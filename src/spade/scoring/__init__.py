"""Scoring a step: rewards and advantages, hint-based regret, designer credit, training samples."""
