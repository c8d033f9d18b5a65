"""Many runs: the nightly sweep (matrix, simulator stage, summary, JUnit) and the compare command."""
