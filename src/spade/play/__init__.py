"""Playing environments: the agent, its prompts and demonstrations, rollouts and a step's plays."""
