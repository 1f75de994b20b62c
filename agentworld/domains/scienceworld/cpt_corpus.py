"""The scienceworld domain's part of the CPT corpus source `game_rules`: ScienceWorld's task list,
action templates and task descriptions (the latter two need its JVM)."""

from __future__ import annotations

import logging

from tqdm import tqdm

from agentworld.data.corpora import Document

log = logging.getLogger(__name__)



def scienceworld_rules(with_simulator: bool = True) -> list[Document]:
    """ScienceWorld's task list (package file) and, from the simulator, its action templates and
    the description of every task (variation 0). The simulator part needs Java (~15-20 s)."""
    try:
        from scienceworld.constants import TASKS
    except ImportError as exc:
        log.warning("game_rules: python package 'scienceworld' is unavailable (%s); ScienceWorld part skipped", exc)
        return []
    info = {t["task_name"]: t for t in TASKS}
    listing = "\n".join(f"- {t['task_id']} {t['task_name']}: {t['topic']}, {t['task']}"
                        for t in sorted(TASKS, key=lambda t: [int(x) for x in t["task_id"].split("-")]))
    docs = [Document("game_rules", "scienceworld:tasks", "ScienceWorld tasks",
                     f"ScienceWorld tasks (id, name: topic, task):\n{listing}")]
    if not with_simulator:
        return docs
    from agentworld.domains.scienceworld.env import AMBIGUOUS_PREFIX, REFUSAL, ScienceWorldTextEnv, probe

    ok, reason = probe()
    if not ok:
        log.warning("game_rules: ScienceWorld simulator unavailable (%s); action templates and task "
                    "descriptions skipped", reason)
        return docs
    env = ScienceWorldTextEnv()
    try:
        sw = env._server()  # the project's deterministic JVM launch; closed (and killed if need be) below
        names = sorted(str(n) for n in sw.get_task_names())
        for name in tqdm(names, desc="scienceworld tasks", disable=None):
            sw.load(name, 0, "", generateGoldPath=False)
            if len(docs) == 1:  # the templates do not depend on the task: read them once
                templates = sorted({str(a["action_example"]) for a in sw.get_possible_actions_with_IDs()})
                simplifications = ", ".join(sorted(str(s) for s in sw.get_possible_simplifications()))
                docs.append(Document("game_rules", "scienceworld:actions", "ScienceWorld action templates", "\n".join([
                    "ScienceWorld action templates (OBJ stands for an object or location in view):",
                    *(f"  {t}" for t in templates),
                    f'Unparseable input is answered with "{REFUSAL}"; input matching several objects starts '
                    f'with "{AMBIGUOUS_PREFIX}" and lists numbered choices to answer with.',
                    f"Optional simplifications: {simplifications}."])))
            meta = info.get(name, {})
            title = f"ScienceWorld task {name}" + (f" ({meta['topic']}: {meta['task']})" if meta else "")
            text = "\n".join([title + (f", task id {meta['task_id']}" if meta else ""),
                              f"Variations: {int(sw.get_max_variations(name))}",
                              f"Task description (variation 0): {str(sw.get_task_description()).strip()}"])
            docs.append(Document("game_rules", f"scienceworld:task:{name}", title, text))
    finally:
        env.close()
    return docs
