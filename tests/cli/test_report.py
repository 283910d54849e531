"""``everlast report``: titles are never cut off at a figure's edge (audit-bounds.png's title was cut off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everlast.cli.report import fit_titles, report_audits

pytest.importorskip("matplotlib")


def test_a_long_title_on_a_narrow_figure_is_wrapped_to_fit() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.0, 2.5))
    ax.set_title("audit: empirical lower bound (red: above the claim) vs claimed epsilon")
    fit_titles(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = ax.title.get_window_extent(r)
    assert "\n" in ax.title.get_text() and box.x0 >= 0 and box.x1 <= fig.bbox.width
    plt.close(fig)


def test_the_audit_plot_of_one_row_keeps_its_title(tmp_path: Path) -> None:
    audit = {"game": "query", "variant": "real", "attack": "halting", "claimed_epsilon": 1.0,
             "epsilon_lower_bound": 0.1, "caught": False, "trials": 100, "confidence": 0.95, "design": "target-charged"}
    _lines, files = report_audits([audit], tmp_path, "audit")
    assert files[0].name == "audit-bounds.png" and files[0].stat().st_size > 0
