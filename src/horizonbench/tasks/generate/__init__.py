"""Generate stage: every family's instance table, sampled on the cluster in shards, with
finished shards kept on disk for reruns (``shard_cache``)."""
