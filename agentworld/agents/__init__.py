"""Agents that learn inside the world model: a small LM policy, behaviour-cloned on successful
real trajectories, trained with GRPO inside WorldModelEnv, and evaluated on the real environment."""
