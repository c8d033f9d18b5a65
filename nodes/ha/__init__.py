"""RocketMQ's classic master-slave HA replication, as a second `NodeLogic` (see `nodes.ha.node`)."""
