"""MIG layouts against each model's placement rules (podium.api.mig)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.api import mig


@pytest.mark.parametrize(
    "layout",
    [
        ["7g.80gb"],
        ["1g.10gb"] * 7,
        ["1g.20gb"] * 4,
        ["3g.40gb", "3g.40gb"],
        ["4g.40gb", "3g.40gb"],
        ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],  # mig-parted's all-balanced
        ["2g.20gb"] * 3 + ["1g.10gb"],
        [],
    ],
)
def test_layouts_a_real_h100_takes_are_placed(layout: list[str]) -> None:
    slices = mig.place("h100-80gb", layout)
    assert [s.profile.name for s in slices] == layout
    used: set[int] = set()
    for s in slices:
        span = set(range(s.start, s.start + s.profile.memory))
        assert s.start in s.profile.starts and not span & used
        used |= span


def test_all_balanced_needs_the_3g_slice_at_its_second_start() -> None:
    slices = mig.place("h100-80gb", ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"])
    assert slices[3].start == 4


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (["1g.5gb"], "'1g.5gb' is not a MIG profile of the H100 80GB (expected one of 1g.10gb,"),
        (["1g.10gb"] * 8, "H100 80GB: at most 7 x 1g.10gb (1g.10gb takes 1 memory slice(s) at "
         "start 0/1/2/3/4/5/6)"),
        (["4g.40gb", "4g.40gb"], "at most 1 x 4g.40gb"),
        (["7g.80gb", "1g.10gb"], "needs 8 compute slices; a GPU has 7"),
        (["3g.40gb", "3g.40gb", "1g.10gb"], "does not fit its 8 memory slices (3g.40gb takes 4"),
    ],
)  # fmt: skip
def test_a_bad_layout_names_the_rule_in_one_line(layout: list[str], expected: str) -> None:
    with pytest.raises(mig.MigLayoutError) as caught:
        mig.place("h100-80gb", layout)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_models_are_found_by_type_and_memory() -> None:
    assert mig.model_for("h100", 81920) == "h100-80gb"
    assert mig.model_for("H100", 95830) == "h100-94gb"
    assert mig.model_for("a100", 40960) == "a100-40gb"
    assert mig.model_for("a100", 81920) == "a100-80gb"
    assert mig.model_for("h200", 143771) == "h200-141gb"
    assert mig.model_for("l40s", 49152) is None
    assert "1g.18gb" in mig.profiles("h200-141gb")


@settings(deadline=None)  # the exhaustive search takes a while on a loaded 2-core machine
@given(st.data(), st.sampled_from(["h100-80gb", "a30-24gb"]))
def test_a_layout_is_placed_exactly_when_some_placement_exists(
    data: st.DataObject, model: str
) -> None:
    """Against an exhaustive search over every start of every slice (the 8-slice
    geometry and the A30's 4)."""
    layout = data.draw(st.lists(st.sampled_from(list(mig.MODELS[model])), max_size=8))
    known = mig.profiles(model)

    def some_placement(rest: list[str], taken: frozenset[int]) -> bool:
        if not rest:
            return True
        profile = known[rest[0]]
        for start in profile.starts:
            span = frozenset(range(start, start + profile.memory))
            if not span & taken and some_placement(rest[1:], taken | span):
                return True
        return False

    compute_slices = mig.slice_counts(model)[1]
    fits = sum(known[n].compute for n in layout) <= compute_slices and some_placement(
        layout, frozenset()
    )
    try:
        mig.place(model, layout)
        placed = True
    except mig.MigLayoutError:
        placed = False
    assert placed == fits


def test_the_a30_has_four_slices_and_its_own_profiles() -> None:
    """Issue 46: the GPU-sharing seed's 1g.6gb and 4g.24gb (A30) were refused as unknown."""
    assert mig.model_for("a30", 24576) == "a30-24gb"
    assert mig.slice_counts("a30-24gb") == (4, 4)
    assert [s.start for s in mig.place("a30-24gb", ["1g.6gb"] * 4)] == [0, 1, 2, 3]
    assert [s.start for s in mig.place("a30-24gb", ["2g.12gb", "1g.6gb", "1g.6gb"])] == [0, 2, 3]
    with pytest.raises(mig.MigLayoutError, match="needs 5 compute slices; a GPU has 4"):
        mig.place("a30-24gb", ["4g.24gb", "1g.6gb"])
    with pytest.raises(mig.MigLayoutError, match=r"at most 1 x 4g\.24gb"):
        mig.place("a30-24gb", ["4g.24gb", "4g.24gb"])
    assert mig.compute_fraction("2g.12gb") == 0.5 and mig.compute_fraction("3g.40gb") == 3 / 7


def test_blackwell_profiles_are_nvidias() -> None:
    assert mig.model_for("b200", None) == "b200-180gb"
    assert mig.model_for("gb200", None) == "gb200-186gb"
    assert next(iter(mig.profiles("b200-180gb"))) == "1g.23gb"
    assert [s.start for s in mig.place("gb200-186gb", ["3g.93gb", "3g.93gb"])] == [0, 4]


def test_several_slices_need_one_task_each() -> None:
    """CUDA enumerates one MIG device per process (the GPU-sharing seed's caveat)."""
    assert mig.several_slices_refusal("1g.10gb", 1, 1) is None
    assert mig.several_slices_refusal("1g.10gb", 2, 2) is None
    why = mig.several_slices_refusal("1g.10gb", 2, 1)
    assert why is not None and "--ntasks=2" in why and "--gres=gpu:1g.10gb:1" in why
