"""Programs the nemesis runs on the nodes themselves (shipped in the node image at /opt/dledger/agents).

Each is one standalone script: Python's standard library plus, where said, a Debian package
the image installs. They never import the harness.
"""
