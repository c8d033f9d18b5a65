"""Showing results: the results-folder web server, its run index, re-rendering a run's report."""
