"""Rendering a checked run: report.html, its plots, timeline.html and the faults in words."""
