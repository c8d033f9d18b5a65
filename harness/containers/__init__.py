"""Nodes in Docker: the images, the cluster's network and containers, the container Db, clean-up."""
