"""Cluster lifecycle, SSH control, clients, generator, history and the run command line."""
