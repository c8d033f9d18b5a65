"""Importers: other people's histories as results folders that `python -m checkers check` reads.

`jepsen` reads Jepsen histories (Kafka-style sends and polls, Elle's list append), `porcupine`
Porcupine's kv histories; each writes one folder per key of its source (`OUTDIR/<key>/`:
history.jsonl and a test.json saying where it came from). `source` reads EDN and JSON,
`writer` builds and writes the folders, `cli` is the command (`python -m checkers import`).
docs/importing.md says what each maps and refuses.
"""
