"""3-D replay, off screen: the load is drawn where the log puts it; videos and screenshots."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rosbags")
pytest.importorskip("pyvista")

from flights import fly_formation  # noqa: E402

from cableload_sim.io.runlog import RunLogWriter, read_run  # noqa: E402
from cableload_sim.viz.replay import (  # noqa: E402
    LOAD_COLOR,
    SLACK_COLOR,
    ReplayScene,
    frame_times,
    make_plotter,
    replay,
    tension_color,
)


@pytest.fixture(scope="module")
def bag(tmp_path_factory, paper_config):
    path = tmp_path_factory.mktemp("replay") / "run.bag"
    fly_formation(paper_config, 4.0, logger=RunLogWriter(path, paper_config))
    return path


def _load_pixels(image: np.ndarray) -> np.ndarray:
    """Mask of pixels in the load's orange, lit or shaded (R > G > B, G about half of R)."""
    rgb = image[..., :3].astype(float)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    ratio = g / np.maximum(r, 1.0)
    return (r > 60) & (r - b > 0.6 * r) & (ratio > 0.35) & (ratio < 0.75)


def _project(plotter, point) -> tuple[float, float]:
    """World point -> (column, row) in the screenshot (rows from the top)."""
    renderer = plotter.renderer
    renderer.SetWorldPoint(*point, 1.0)
    renderer.WorldToDisplay()
    x, y, _ = renderer.GetDisplayPoint()
    height = plotter.window_size[1]
    return x, height - 1 - y


def test_load_is_drawn_where_the_log_puts_it(bag):
    run = read_run(bag)
    plotter = make_plotter((640, 480))
    scene = ReplayScene(run, plotter)
    centers = []
    for t in (0.5, 3.5):
        scene.show(t)
        image = plotter.screenshot(return_img=True)
        background = np.all(image == 255, axis=-1)
        assert background.mean() < 0.99 and len(np.unique(image.reshape(-1, 3), axis=0)) > 20
        k = scene.index_at(t)
        assert run.samples.t[k] == pytest.approx(t)
        col, row = _project(plotter, run.samples.load_p[k])
        mask = _load_pixels(image)
        assert mask.sum() > 100
        window = mask[int(row) - 2 : int(row) + 3, int(col) - 2 : int(col) + 3]
        assert window.all(), f"load colour missing at the projected load position {col, row}"
        rows, cols = np.nonzero(mask)
        assert np.hypot(cols.mean() - col, rows.mean() - row) < 10.0
        centers.append((col, row))
    # The load moved across the screen between the two times, and the box followed it.
    assert np.hypot(*np.subtract(centers[1], centers[0])) > 30.0
    plotter.close()


def test_video_and_screenshot_off_screen(bag, tmp_path):
    import imageio.v2 as imageio

    video, shot = tmp_path / "replay.mp4", tmp_path / "shot.png"
    written = replay(
        bag,
        video=video,
        screenshot=shot,
        time=2.0,
        start=1.0,
        end=1.5,
        fps=10,
        window_size=(330, 250),
        interactive=False,
    )
    assert written == [shot, video]
    reader = imageio.get_reader(video)
    frames = [frame for frame in reader]
    reader.close()
    assert len(frames) == len(frame_times(1.0, 1.5, 1.0, 10)) == 6
    assert frames[0].shape == (256, 336, 3)  # sides rounded up to multiples of 16
    assert all((frame < 200).any(axis=-1).mean() > 0.002 for frame in frames)
    assert np.abs(frames[-1].astype(int) - frames[0].astype(int)).max() > 50  # things moved
    image = imageio.imread(shot)
    assert image.shape[:2] == (256, 336) and _load_pixels(image).sum() > 20


def test_without_display_something_must_be_written(bag, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="video="):
        replay(bag)


def test_cable_colours_and_frame_times():
    assert tension_color(0.0, 10.0) == SLACK_COLOR
    assert tension_color(-1.0, 10.0) == SLACK_COLOR
    low, high = tension_color(0.1, 10.0), tension_color(10.0, 10.0)
    assert low != high and high == pytest.approx((0.993, 0.906, 0.144))
    assert LOAD_COLOR not in (low, high)
    np.testing.assert_allclose(frame_times(0.0, 1.0, 2.0, 10.0), np.arange(6) * 0.2)
