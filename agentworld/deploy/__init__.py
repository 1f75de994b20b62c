"""The production stack's helpers (scripts/prod_stack.sh brings the services up): the object
store's snapshots and the failure/deadline alerts of the DAGs."""
