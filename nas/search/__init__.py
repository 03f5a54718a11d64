"""Running a search: the Optuna and Ray drivers, schedules, progress, tracking."""
