"""DLedger's commit log: the store interface, the mmap file store and its recovery,
the in-memory store and the term file."""
