"""Array task indices as ranges (podium.api.arrays): Slurm's notation, round trips,
and a pending set that shrinks one task at a time without ever expanding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.api import arrays


def test_slurm_notation_for_runs_strides_and_singletons() -> None:
    ranges = arrays.compress([0, 4, 8, 12, 20, 30, 31, 32, 33, 40, 42])
    assert arrays.format_ranges(ranges) == "0-12:4,20,30-33,40,42"
    assert arrays.format_ranges(ranges, throttle=2) == "0-12:4,20,30-33,40,42%2"
    assert arrays.count(ranges) == 11 and arrays.lowest(ranges) == 0


def test_a_million_pending_tasks_are_a_few_bytes_and_shrink_without_expanding() -> None:
    ranges = arrays.parse("0-999999")
    ranges = arrays.without(ranges, arrays.lowest(ranges))
    ranges = arrays.without(ranges, 500_000)
    assert arrays.format_ranges(ranges) == "1-499999,500001-999999"
    assert arrays.count(ranges) == 999_998 and not arrays.holds(ranges, 500_000)


def test_squeue_r_lists_each_pending_task_of_an_array_record() -> None:
    record = {"job_id": 7, "array_job_id": 7, "array_task_id": None,
              "array_task_string": "2-6:2%1", "display_id": "7_[2-6:2%1]"}  # fmt: skip
    rows = arrays.expanded(record)
    assert [r["display_id"] for r in rows] == ["7_2", "7_4", "7_6"]
    assert [r["array_task_id"] for r in rows] == [2, 4, 6]
    task = {"job_id": 9, "array_job_id": 7, "array_task_id": 0, "array_task_string": None}
    assert arrays.expanded(task) == [task]


@given(st.sets(st.integers(min_value=0, max_value=300), min_size=1), st.data())
def test_ranges_round_trip_and_lose_exactly_the_index_taken(
    indices: set[int], data: st.DataObject
) -> None:
    ranges = arrays.parse(arrays.format_ranges(arrays.compress(indices)))
    assert set(arrays.each(ranges)) == indices
    assert arrays.count(ranges) == len(indices)
    taken = data.draw(st.sampled_from(sorted(indices)))
    left = arrays.without(ranges, taken)
    assert set(arrays.each(left)) == indices - {taken}
    assert set(arrays.each(arrays.parse(arrays.format_ranges(left)))) == indices - {taken}


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20), st.integers(1, 5)), min_size=1))
def test_what_users_write_is_normalised_without_listing_it(
    parts: list[tuple[int, int, int]],
) -> None:
    ranges = [range(start, start + length + 1, step) for start, length, step in parts]
    indices = {i for r in ranges for i in r}
    normal = arrays.normal(ranges)
    assert set(arrays.each(normal)) == indices and arrays.count(normal) == len(indices)
    assert arrays.stride(normal) == arrays.stride(arrays.compress(indices))
