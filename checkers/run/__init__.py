"""The one pass over a run's files after it ends: the reader and its listeners (fault log, series)."""
