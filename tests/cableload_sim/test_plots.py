"""Run-log plots: PNG files, and figures that draw exactly what the log holds."""

from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("rosbags")
pytest.importorskip("matplotlib")

from flights import fly_formation  # noqa: E402

from cableload_sim.io.runlog import RunLogWriter, read_run  # noqa: E402
from cableload_sim.metrics import uav_distances  # noqa: E402
from cableload_sim.viz.plots import (  # noqa: E402
    figure_min_distance,
    figure_tensions,
    figure_top_view,
    figure_tracking_errors,
    plot_run,
)


@pytest.fixture(scope="module")
def bag(tmp_path_factory, paper_config):
    path = tmp_path_factory.mktemp("plots") / "run.bag"
    result = fly_formation(paper_config, 3.0, logger=RunLogWriter(path, paper_config))
    return path, result


def _lines(ax):
    return {line.get_label(): line for line in ax.lines}


def test_plot_run_writes_pngs(bag, tmp_path):
    path, _ = bag
    files = plot_run(path, tmp_path / "plots")
    assert sorted(f.name for f in files) == [
        "cable_tension.png",
        "min_distance.png",
        "top_view.png",
        "tracking_error.png",
    ]
    for file in files:
        data = file.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", file
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 600 and height >= 400 and len(data) > 20_000, file


def test_figures_draw_the_logged_data(bag):
    path, result = bag
    run = read_run(path)
    samples = result.samples

    top = _lines(figure_top_view(run).axes[0])
    np.testing.assert_array_equal(top["load"].get_xdata(), samples.load_p[:, 0])
    np.testing.assert_array_equal(top["load"].get_ydata(), samples.load_p[:, 1])
    np.testing.assert_array_equal(top["load reference"].get_ydata(), result.ref_p[:, 1])
    np.testing.assert_array_equal(top["quad2"].get_xdata(), samples.uav_p[:, 1, 0])

    separation = figure_min_distance(run).axes[0]
    lines = _lines(separation)
    np.testing.assert_array_equal(lines["min distance"].get_ydata(), uav_distances(samples.uav_p))
    assert list(lines["collision 0.4 m"].get_ydata()) == [0.4, 0.4]
    assert np.min(lines["min distance"].get_ydata()) == pytest.approx(result.metrics["min_uav_distance_m"])

    tension = _lines(figure_tensions(run).axes[0])
    for i in range(3):
        np.testing.assert_array_equal(tension[f"cable quad{i + 1}"].get_ydata(), samples.cable_tension[:, i])

    position_ax, attitude_ax = figure_tracking_errors(run).axes
    error = position_ax.lines[0].get_ydata()
    np.testing.assert_allclose(np.sqrt(np.mean(error**2)), result.metrics["rmse_position_m"], rtol=1e-12)
    attitude = attitude_ax.lines[0].get_ydata()
    np.testing.assert_allclose(
        np.sqrt(np.mean(attitude**2)), result.metrics["rmse_orientation_deg"], rtol=1e-12
    )
