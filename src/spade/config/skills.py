"""The target skills of the two settings (SPEC §1): slug -> display name."""

from __future__ import annotations

from spade.config.types import Setting

GAME_SKILLS: dict[str, str] = {
    "mathematical_reasoning": "Mathematical Reasoning",
    "logical_deduction": "Logical Deduction",
    "spatial_reasoning": "Spatial Reasoning",
    "pattern_recognition": "Pattern Recognition",
    "optimization": "Optimization",
    "causal_inference": "Causal Inference",
}
TOOL_SKILLS: dict[str, str] = {
    "api_orchestration": "API Orchestration",
    "data_retrieval": "Data Retrieval",
    "state_modification": "State Modification",
    "error_recovery": "Error Recovery",
    "tool_selection": "Tool Selection",
    "multi_step_workflows": "Multi-Step Workflows",
}


def skills_for(setting: Setting) -> dict[str, str]:
    """The skills of one setting."""
    return GAME_SKILLS if setting == "games" else TOOL_SKILLS


def setting_of(skill: str) -> Setting:
    """The setting a skill belongs to; raises ValueError for an unknown skill."""
    if skill in GAME_SKILLS:
        return "games"
    if skill in TOOL_SKILLS:
        return "tool_use"
    known = ", ".join([*GAME_SKILLS, *TOOL_SKILLS])
    raise ValueError(f"unknown skill {skill!r}; known skills: {known}")
