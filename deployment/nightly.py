"""Serve the pipeline as a Prefect deployment that runs every night.

    PREFECT_API_URL=http://127.0.0.1:4200/api .venv/bin/python deployment/nightly.py \\
        --config configs/figure1.yaml --out 'runs/nightly/{date}' --cron '0 2 * * *'

Start a server first (`.venv/bin/prefect server start`) to see the runs in its UI.
The process keeps running and starts a flow run at each cron time; `{date}` in --out
becomes the night's date. Put `evaluation.store` in the config to share one attempt
store across nights, so unchanged attempts are never paid for twice.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from horizonbench.flows.pipeline import pipeline
from horizonbench.schemas.config import load_config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="run config (YAML or JSON)")
    p.add_argument("--out", default="runs/nightly/{date}", help="run folder; {date} is replaced")
    p.add_argument("--cron", default="0 2 * * *", help="schedule, cron syntax (UTC)")
    p.add_argument("--name", default="nightly", help="deployment name")
    args = p.parse_args()
    load_config(args.config)  # fail now, not at 2 a.m.
    pipeline.serve(
        name=args.name,
        cron=args.cron,
        parameters={"config": str(Path(args.config).resolve()), "out": str(Path(args.out).resolve())},
        tags=["horizonbench"],
    )


if __name__ == "__main__":
    main()
