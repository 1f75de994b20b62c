"""What the DAG files share beyond the stage functions, so each DAG file stays thin (it
schedules and parametrises, nothing else):

- `form`: the trigger form, generated from the params schema;
- `runs`: a run's resolved settings and its workspace (runs/airflow/<run_id>/);
- `workspace`: that workspace as a git worktree and DVC experiment of the project;
- `launch`: running a stage with `dvc repro` (or an agent phase) in a process of its own, gates;
- `assets`: the validated-trajectories Assets and their events;
- `taskflow`: the TaskFlow task factories and chains several DAGs use.

Airflow puts the DAGs folder on sys.path, so the DAG files import `agentworld_dags.<module>`;
`.airflowignore` keeps the DAG processor from parsing these modules as DAG files.

Why every stage runs as its own process (`python -m agentworld.cli stage ...`): Airflow 3's
task runner is the `airflow` console script, and it withholds the metadata database from task
code (its connection string becomes `airflow-db-not-allowed:///`). Python's `spawn` start
method re-imports the parent's main script in every child, so any worker pool, vLLM engine or
trainer that spawns processes inside a task would re-import Airflow and die in its ORM set-up.
A stage process is `dvc repro` of the stage, whose command has our CLI as its main module.
"""
