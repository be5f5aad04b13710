"""Serve the pipeline as a Prefect deployment that runs every night, in this process.

    .venv/bin/prefect server start &                     # the UI, http://127.0.0.1:4200
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    .venv/bin/python deployment/nightly.py --config configs/figure1.yaml \\
        --out 'runs/nightly/{date}' --cron '0 2 * * *' --timezone Europe/Berlin \\
        --notify slack-webhook/horizonbench-alerts

The process keeps running and starts a flow run at each cron time in the time zone
(an IANA name; UTC by default); `{date}` in --out becomes the run's UTC date. Put
`evaluation.store` in the config to share one attempt store across nights, so an
unchanged attempt is never paid for twice. This is `horizonbench serve` without the
package's CLI; deployment/prefect.yaml is the work-pool alternative (a worker runs them).
"""

from __future__ import annotations

import argparse
import sys

from horizonbench.core.errors import ConfigError
from horizonbench.flows import deployment as nightly


def main() -> int:
    """Parse the flags and serve; a bad config, schedule or block is one line and exit 2."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="run config (YAML or JSON)")
    p.add_argument("--out", default=nightly.DEFAULT_OUT, help="run folder; {date} is replaced")
    p.add_argument("--cron", default=nightly.DEFAULT_CRON, help="schedule, cron syntax, in --timezone")
    p.add_argument(
        "--timezone", default=nightly.DEFAULT_TIMEZONE, help="IANA time zone of the cron (Europe/Berlin)"
    )
    p.add_argument("--name", default=nightly.DEFAULT_NAME, help="deployment name")
    p.add_argument("--notify", metavar="TYPE/NAME", help="notification block to alert on failure")
    args = p.parse_args()
    try:
        nightly.serve_nightly(args.config, args.out, args.cron, args.timezone, args.name, args.notify)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
