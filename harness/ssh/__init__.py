"""Driving nodes over SSH: the node lifecycle every Db shares (SshNodes), the connection, the keys."""
