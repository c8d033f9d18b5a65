"""The checker service: a warm Spark JVM checking folders on request, autostart, when it stops."""
