"""The DLedger node: mmap commit-log store, consensus core, server and client (stdlib only)."""
