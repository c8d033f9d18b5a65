"""PySpark checker, the reference checker, verdicts and reports."""
