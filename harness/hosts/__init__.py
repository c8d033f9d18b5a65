"""Runs on the machines of a TOML inventory: the inventory, capability probe, HostsDb, the sweep's view."""
