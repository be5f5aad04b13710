"""The run folder, the only state the stages share: where its tables live (``layout``),
atomic writes (``storage``) and partitioned tables (``table_parts``), its lock and
``state.json`` (``state``), the manifest and its checks (``manifest``, ``verify``),
what it has paid (``spend``) and what ``horizonbench status`` says of it (``status``).
Nothing here imports a stage."""
