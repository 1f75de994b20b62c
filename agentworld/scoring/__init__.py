"""How close a predicted observation is to the real one: exact match and token F1 (`metrics`),
and the five-dimension judge (`judge`). Evaluation scores with them; training's hybrid reward
is built from them, so neither depends on the other."""
