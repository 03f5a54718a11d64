"""A candidate proposed again is answered from the study's store, not trained again.

A trial is a function of (study config, arch, seed), and every trial of a study shares its seed,
so evaluating a candidate a second time reproduces the stored result exactly, at the cost of a
whole training. Optuna's samplers propose front members again (multivariate TPE about 1 in 4 of
300 proposals on the conditional bench); the default sampler avoids repeats, but a study may
enqueue one or run out of novel archs. Such a trial copies its twin's values, constraints and
metrics and names it (``repeat_of``). It still counts as a trial, so ``n_trials`` and what the
sampler learns are what they were; only the training is saved. Rung trials (successive
halving) keep their own duplicate rule (``nas.search.schedule``).
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.study import store

REPEAT_OF = "repeat_of"
# This trial's own attributes, not its twin's.
OWN = frozenset({store.PROCESS, "worker", "move", REPEAT_OF})


def finished_twin(trial: optuna.Trial) -> FrozenTrial | None:
    """The first COMPLETE trial that asked the same choices with the same values (the whole
    candidate: arch and layer-wise mapping), or None."""
    params = trial.params
    for done in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if done.number != trial.number and done.values is not None and done.params == params:
            return done
    return None


def answer_from(trial: optuna.Trial, twin: FrozenTrial) -> tuple[float, ...]:
    """Give ``trial`` its twin's result: constraints, metrics and values."""
    for key, value in twin.constraints.items():
        trial.set_constraint(key, value)
    for key, value in twin.user_attrs.items():
        if key == "info":  # the twin's timings were spent once, by the twin
            value = {k: v for k, v in value.items() if not k.startswith("seconds_")}
        if key not in OWN:
            trial.set_user_attr(key, value)
    trial.set_user_attr(REPEAT_OF, twin.user_attrs.get(REPEAT_OF, twin.number))
    return tuple(twin.values)
