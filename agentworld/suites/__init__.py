"""Agent test suites: test any agent against the simulator and the real environments, with
injected faults and pass/fail thresholds (`agentworld agent test SUITE`)."""
