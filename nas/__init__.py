"""The search: study configs, objectives, the Optuna and Ray Tune drivers, Pareto fronts, export,
reports and the ``hwnas`` command line. Depends on every other package; none depends on it."""

import hwnas  # noqa: F401  (first: it sets Ray's switches before a room imports Ray)
