"""Score stage: every answer parsed and replayed in its family's simulator, in shards
(``shards``) on the cluster or in-process."""
