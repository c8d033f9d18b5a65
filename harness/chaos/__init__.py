"""One chaos run: flags, generator, workload, consumers, nemesis runner, history, final reads, RunDb."""
