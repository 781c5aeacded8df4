"""Report figures: median line with a min-max band, one shared legend outside the panels, distinct
colour-blind-safe styles, and a vector copy written deterministically."""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from replication import figures

X = np.array([1.0, 2.0, 5.0, 10.0])


def test_the_line_is_the_median_over_seeds_and_the_band_the_range():
    """Seeds 1, 10, 1000: median 10, geometric mean 21.5 (above two of the three seeds)."""
    fig, ax = plt.subplots()
    curves = [(X, np.full(4, 1.0)), (X, np.full(4, 10.0)), (X, np.full(4, 1000.0))]
    figures.median_band(ax, curves, "sabo")
    (line,) = ax.get_lines()
    assert np.allclose(line.get_ydata(), 10.0)
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 1.0 and band.max() == 1000.0
    plt.close(fig)


def test_a_seed_that_stopped_drops_out_and_non_positive_values_are_missing():
    fig, ax = plt.subplots()
    figures.median_band(ax, [(X, [4.0, 4.0, 4.0, 4.0]), (X[:2], [2.0, 0.0])], "ingo")
    (line,) = ax.get_lines()
    assert np.allclose(line.get_ydata(), [3.0, 4.0, 4.0, 4.0])
    plt.close(fig)


def test_every_known_method_has_its_own_colour_marker_and_line_style():
    styles = [figures.style(m) for m in figures.METHOD_STYLE if m != "zero_shot"]
    assert len({s["marker"] for s in styles}) == len(styles)
    assert len({(s["color"], str(s["linestyle"])) for s in styles}) == len(styles)
    assert set(s["color"] for s in styles) <= set(figures.OKABE_ITO.values())
    assert figures.style("my_method")["marker"] and figures.method_label("my_method") == "my_method"


def test_one_shared_legend_below_the_panels_and_a_deterministic_vector_copy(tmp_path):
    def draw():
        fig, axes = figures.new_figure(2, "title")
        for ax in axes:
            for m in ("sabo", "ingo", "cmaes"):
                figures.median_band(ax, [(X, X ** -1.0)], m)
            ax.set_yscale("log")
        return fig

    fig = draw()
    png, svg = figures.save(fig, tmp_path / "a.png")
    assert png.exists() and svg.suffix == ".svg" and svg.read_text().lstrip().startswith("<?xml")
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["SABO", "INGO", "CMA-ES"]  # once each, though drawn in both panels
    FigureCanvasAgg(fig).draw()  # save() closed the figure: give it a canvas to measure on
    renderer = fig.canvas.get_renderer()
    legend_top = fig.legends[0].get_window_extent(renderer).y1
    assert all(legend_top <= ax.get_window_extent(renderer).y0 for ax in fig.axes)  # below every panel
    _, svg2 = figures.save(draw(), tmp_path / "b.png")
    assert svg.read_bytes() == svg2.read_bytes() and png.read_bytes() == (tmp_path / "b.png").read_bytes()


def rgb_distance(a, b) -> float:
    return float(np.linalg.norm(np.subtract(to_rgb(a), to_rgb(b))))


def test_a_method_without_an_entry_is_drawn_far_from_every_other_colour_and_marker(monkeypatch):
    """A plug-in's curve is not matplotlib's next colour (C0 is 0.12 from INGO's blue): its colour is
    at least 0.25 from every known method's and from other plug-ins' (RGB in [0, 1]), its marker is
    its own, and both stay the same for the same name."""
    monkeypatch.setattr(figures, "_fallback_slots", {}, raising=False)  # the slots of this test's names only
    known = [figures.style(m) for m in figures.METHOD_STYLE]
    unknown = ["my_method", "plugin_a", "plugin_b", "u", "v", "w", "x", "y"]  # 3 of them share a CRC-32 slot
    fig, ax = plt.subplots()
    for m in unknown:
        figures.median_band(ax, [(X, X ** -1.0)], m)
    drawn = dict(zip(unknown, (line.get_color() for line in ax.get_lines())))
    markers = {m: line.get_marker() for m, line in zip(unknown, ax.get_lines())}
    plt.close(fig)
    for m in unknown:
        assert min(rgb_distance(drawn[m], k["color"]) for k in known) >= 0.25, m
        assert markers[m] not in {k["marker"] for k in known}, m
        assert figures.style(m) == figures.style(m) and figures.style(m)["color"] == drawn[m]
    for i, a in enumerate(unknown):
        for b in unknown[i + 1:]:
            assert rgb_distance(drawn[a], drawn[b]) >= 0.25, (a, b)
            assert markers[a] != markers[b], (a, b)
    ninth = figures.style("z")  # more plug-ins than colours: a colour again, with another marker
    assert (ninth["color"], ninth["marker"]) not in {(drawn[m], markers[m]) for m in unknown}


def test_a_plugins_declared_name_and_colour_label_its_curves_and_tables(registries):
    """A method without an entry is shown as its class declares (display_name, color): in the legend, the curve's
    colour and the tables' method_label; what it does not declare falls back; a built-in method keeps its entry."""
    from helpers import define_random_search

    import baselines

    plain = define_random_search("plain_search")
    declared = type("DeclaredSearch", (plain,), {"name": "declared_search", "display_name": "Declared search",
                                                 "color": "#117733"})
    baselines.register(plain)
    baselines.register(declared)
    fig, ax = plt.subplots()
    for m in ("declared_search", "plain_search", "sabo"):
        figures.median_band(ax, [(X, X ** -1.0)], m)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["Declared search", "plain_search", "SABO"]
    assert to_rgb(lines[0].get_color()) == to_rgb("#117733")
    assert lines[1].get_color() in figures.FALLBACK_COLORS and to_rgb(lines[2].get_color()) == to_rgb("#D55E00")
    plt.close(fig)
    assert figures.method_label("declared_search") == "Declared search"
    assert figures.method_label("plain_search") == "plain_search" and figures.method_label("sabo_inverse") == \
        "SABO, radius 1/rho (deviation)"


def test_declarations_of_the_wrong_kind_are_refused_naming_the_class():
    import pytest

    from sabo.protocol import AskTellOptimizer

    for attributes, message in [({"color": "green"}, r"\.color must be a colour '#RRGGBB' \(got 'green'\)"),
                                ({"display_name": "two\nlines"}, r"\.display_name must be a non-empty one-line"),
                                ({"min_popsize": 0}, r"\.min_popsize must be an integer >= 1 \(got 0\)")]:
        with pytest.raises(ValueError, match=message):
            type("Wrong", (AskTellOptimizer,), attributes)


def test_a_figure_is_never_written_in_place_so_a_kill_cannot_truncate_it(tmp_path, monkeypatch):
    """matplotlib wrote the PNG and SVG into their final paths: a kill (or a full disk) mid-write left a truncated
    figure in results/. Now each is rendered, written to a temporary file beside it and renamed over it, so at
    any moment the figure is the old file or the new one; the final paths are never opened for writing."""
    import builtins
    import os
    from pathlib import Path

    opened, real_open = [], builtins.open

    def spy(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(flag in mode for flag in "wax+"):
            opened.append(Path(file).name)
        return real_open(file, mode, *args, **kwargs)

    (tmp_path / "f.png").write_bytes(b"the previous figure")
    monkeypatch.setattr(builtins, "open", spy)
    fig, axes = figures.new_figure(1, "title")
    axes[0].plot(X, X, label="a")
    png, svg = figures.save(fig, tmp_path / "f.png")
    monkeypatch.undo()
    assert png.read_bytes().startswith(b"\x89PNG") and svg.read_text().rstrip().endswith("</svg>")
    assert len(opened) == 2 and all(name.startswith((".f.png.", ".f.svg.")) and name.endswith(".tmp")
                                    for name in opened), opened
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]
