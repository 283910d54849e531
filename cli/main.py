"""``everlast``: one console command, one subcommand per module in this package."""

from __future__ import annotations

import click

from everlast.cli.audit import audit
from everlast.cli.compare import compare
from everlast.cli.complete import complete
from everlast.cli.consume import consume_cmd
from everlast.cli.demo import demo
from everlast.cli.plan import plan
from everlast.cli.produce import produce_cmd
from everlast.cli.replay import replay_cmd
from everlast.cli.report import report
from everlast.cli.serve import serve
from everlast.cli.simulate import simulate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="everlast")
def main() -> None:
    """Private everlasting prediction (GenericBBL) as a service."""


main.add_command(simulate)
main.add_command(serve)
main.add_command(demo)
main.add_command(replay_cmd)
main.add_command(plan)
main.add_command(complete)
main.add_command(compare)
main.add_command(audit)
main.add_command(report)
main.add_command(produce_cmd)
main.add_command(consume_cmd)
