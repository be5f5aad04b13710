"""Alert a notification block when a run of a deployment fails or crashes.

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    .venv/bin/python deployment/notify.py --block slack-webhook/horizonbench-alerts
    .venv/bin/python deployment/notify.py --deployment horizonbench/nightly \\
        --block custom-webhook/horizonbench-alerts

Creates a Prefect automation (trigger: a flow run of the deployment enters Failed or
Crashed; action: send a notification through the block), replacing one of the same name,
so it is safe to rerun. Create the block first (README, "Nightly runs and deployments").
It cannot live in prefect.yaml: a deployment's `triggers:` there can only start a
deployment, and the action must name the deployment's and the block's ids.
"""

from __future__ import annotations

import argparse
import sys

from horizonbench.core.errors import ConfigError
from horizonbench.flows.deployment import configure_failure_notification


def main() -> int:
    """Parse the flags and create the automation; a missing deployment or block is exit 2."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--deployment", default="horizonbench/nightly", help="FLOW/DEPLOYMENT (default horizonbench/nightly)"
    )
    p.add_argument(
        "--block", required=True, metavar="TYPE/NAME", help="notification block (slack-webhook/alerts)"
    )
    p.add_argument("--name", help="automation name (default: horizonbench: FLOW/DEPLOYMENT failed)")
    args = p.parse_args()
    try:
        automation_id = configure_failure_notification(args.deployment, args.block, args.name)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"automation {automation_id}: {args.block} is notified when {args.deployment} fails or crashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
