"""The checks: Spark queries over a run's tables, the screen, the exact checks and the verdict."""
