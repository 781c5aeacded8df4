"""Objective functions of the replication studies."""
