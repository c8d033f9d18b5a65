"""The Spark engine: the session and its JVM gateway, JSON-lines sources, preload, progress lines."""
