"""Figures are drawn one at a time per process (calibration.drawing): matplotlib's style is global."""

from __future__ import annotations

import threading

from calibration.agreement_plots import human_reference_histogram
from calibration.drawing import drawing
from kind_reports.figures import hygiene_plot

VALUES = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0]


def test_a_figure_waits_while_another_thread_draws_and_gets_its_own_bytes() -> None:
    alone = human_reference_histogram(VALUES)
    assert hygiene_plot({})  # drawn once alone, so the waiting draw below has nothing to load
    entered, release = threading.Event(), threading.Event()
    drawn: list[str] = []

    def hold() -> None:
        # Another figure's style (another id salt) held the way a long draw holds it.
        with drawing({"svg.hashsalt": "another-figure", "font.size": 20}):
            entered.set()
            release.wait(30)

    def draw() -> None:
        hygiene_plot({})
        drawn.append(human_reference_histogram(VALUES))

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(30)
    drawer = threading.Thread(target=draw)
    drawer.start()
    drawer.join(1.5)
    waited = drawer.is_alive()
    release.set()
    holder.join(30)
    drawer.join(60)
    assert waited, "a figure was drawn while another thread held matplotlib's style"
    assert drawn == [alone]


def test_threads_drawing_at_once_get_the_bytes_of_one_thread() -> None:
    alone = human_reference_histogram(VALUES)
    results: list[str] = []
    start = threading.Barrier(3)

    def draw() -> None:
        start.wait()
        for _ in range(4):
            results.append(human_reference_histogram(VALUES))
            hygiene_plot({})

    threads = [threading.Thread(target=draw) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [alone] * 12
