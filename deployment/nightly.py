"""Serve the pipeline as a Prefect deployment that runs every night.

    .venv/bin/prefect server start &                     # the UI, http://127.0.0.1:4200
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    .venv/bin/python deployment/nightly.py --config configs/figure1.yaml \\
        --out 'runs/nightly/{date}' --cron '0 2 * * *'

The process keeps running and starts a flow run at each cron time (UTC); `{date}` in
--out becomes the night's date. Put `evaluation.store` in the config to share one
attempt store across nights, so an unchanged attempt is never paid for twice.
"""

from __future__ import annotations

import argparse

from prefect import serve

from horizonbench.flows.deployment import nightly_deployment


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="run config (YAML or JSON)")
    p.add_argument("--out", default="runs/nightly/{date}", help="run folder; {date} is replaced")
    p.add_argument("--cron", default="0 2 * * *", help="schedule, cron syntax (UTC)")
    p.add_argument("--name", default="nightly", help="deployment name")
    args = p.parse_args()
    serve(nightly_deployment(args.config, args.out, args.cron, args.name))


if __name__ == "__main__":
    main()
