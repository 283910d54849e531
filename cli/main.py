"""``everlast``: one console command, one subcommand per module in this package.

Subcommands are imported when they run, not at start: ``everlast --version`` and ``everlast --help``
import click and nothing else of everlast (the engine, scipy, the planner and the Kafka client
cost seconds of CPU). The group lists each subcommand's one-line help from ``COMMANDS``;
tests/cli/test_startup.py checks it against the real commands and measures the start-up.
"""

from __future__ import annotations

import importlib

import click

COMMANDS: dict[str, tuple[str, str, str]] = {
    "audit": ("everlast.cli.audit", "audit",
              "Empirical privacy audit: epsilon lower bound (Clopper-Pearson) vs the planner's claim."),
    "compare": ("everlast.cli.compare", "compare",
                "Compare everlast with the alternatives: n required per horizon, runs, domain size."),
    "complete": ("everlast.cli.complete", "complete",
                 "Complete a hand-written SCHEDULE for its design (default: target-charged, whose noisy halting "
                 "test is filled in; docs/privacy/genericbbl.md section 9) and print what the planner certifies "
                 "for it."),
    "consume": ("everlast.cli.consume", "consume_cmd",
                "Print label records, one per line: the model id and the label as JSON, e.g."),
    "demo": ("everlast.cli.demo", "demo",
             "Serve GenericBBL and the private learner on the embedded broker; replay one stream to both."),
    "gateway": ("everlast.cli.gateway", "gateway_cmd",
                "Serve the HTTP API clients use instead of Kafka: authenticated predicts, each client's own labels."),
    "gateway-key": ("everlast.cli.gateway", "gateway_key_cmd",
                    "Create an API key for CLIENT: print the key (give it to the client) and the entry for "
                    "gateway.keys."),
    "plan": ("everlast.cli.plan", "plan",
             "Plan a schedule for privacy/accuracy targets and certify it step by step."),
    "produce": ("everlast.cli.produce", "produce_cmd",
                "Send queries to the daemon: JSON objects such as '{\"id\": 1, \"x\": 0.7}', given as arguments "
                "or one per line on stdin."),
    "replay": ("everlast.cli.replay", "replay_cmd",
               "Produce queries, match the label records by id, report throughput, latency, statuses, accuracy."),
    "report": ("everlast.cli.report", "report",
               "Plots and a Markdown summary from simulate, replay, audit or stream-run JSON (one or more FILES)."),
    "round": ("everlast.cli.hand_round", "round_cmd",
              "Build a runnable hand-written round for N examples of CONCEPT and a stream of R queries per round; "
              "print the values chosen, why, and what it certifies."),
    "serve": ("everlast.cli.serve", "serve",
              "Serve the configured models: queries in from Kafka, labels out, metrics on HTTP."),
    "simulate": ("everlast.cli.simulate", "simulate",
                 "Run the predictor in-process on synthetic data labeled by a hidden concept, and print the "
                 "privacy its schedule certifies for this n (docs/PRIVACY.md)."),
    "void-claim": ("everlast.cli.void_claim", "void_claim_cmd",
                   "Void the claim on MODEL whose state never reached the checkpoint store, so that the next start "
                   "creates it afresh."),
}
"""Subcommand -> (module, attribute, the first sentence of its help)."""


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        cmd = getattr(importlib.import_module(entry[0]), entry[1])
        assert isinstance(cmd, click.Command)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, click.Command(n, help=COMMANDS[n][2]).get_short_help_str(limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="everlast")
def main() -> None:
    """Private everlasting prediction (GenericBBL) as a service."""
