"""The production stack's helpers (scripts/prod_stack.sh brings the services up): snapshots of
its object store. The DAGs' failure and deadline alerts are in dags/agentworld_dags/alerts.py."""
