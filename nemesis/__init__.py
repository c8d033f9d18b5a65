"""Fault injection: partitions, kills, pauses, packet faults, clock skew, disk faults, leader churn."""
