"""The systems under test besides our own DLedger node, one package each (issue 35)."""
