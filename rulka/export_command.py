"""``rulka export SOURCE --out DIR``: a trained policy as a folder that outlives its run (see :mod:`rulka.export`)."""
from __future__ import annotations

import sys
from typing import Any


def add_export_command(subparsers: Any) -> None:
    """Register ``rulka export`` (a core command)."""
    parser = subparsers.add_parser(
        "export", help="write a trained policy (weights, config, spaces, filters) to a folder load_policy reads",
        description="Write the online network's state_dict (policy.pt, read by torch.load(..., weights_only=True)), "
                    "the config snapshot, the observation and action spaces and the filters with their state "
                    "(policy.yaml) to --out: rulka.policy.load_policy(DIR) rebuilds the policy from them alone.")
    parser.add_argument("source", metavar="RUN_DIR|CHECKPOINT",
                        help="a run folder (its checkpoints/last.pt), a checkpoint file inside one (e.g. "
                             "RUN/checkpoints/best.pt), or an export folder")
    parser.add_argument("--out", required=True, metavar="DIR", help="the export folder (new, empty, or an earlier export)")
    parser.set_defaults(func=run_export_command)


def run_export_command(args: Any) -> int:
    from rulka.export import export_policy, read_description

    out = export_policy(args.source, args.out)
    counters = (read_description(out).get("source") or {}).get("counters") or {}
    steps = f" after {counters['env_steps']} environment steps" if "env_steps" in counters else ""
    print(f"exported {args.source}{steps} to {out}: policy.pt, policy.yaml, config_snapshot.yaml", file=sys.stderr)
    return 0
