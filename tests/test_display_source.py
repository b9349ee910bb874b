"""display.show_source's optional line range: the chapters show a slice of a library function."""
import pytest

from course_lib import display


def sample_fn(x):
    a = x + 1          # step 1
    b = a * 2          # step 2
    c = b - 3          # step 3
    return c


def test_range_starts_at_the_start_marker_and_stops_before_the_end_marker():
    text = display.source_lines(sample_fn, "# step 2", "return")
    assert text.splitlines() == ["    b = a * 2          # step 2", "    c = b - 3          # step 3"]


def test_range_without_end_runs_to_the_last_line_and_no_range_is_the_whole_function():
    assert display.source_lines(sample_fn, "# step 3").splitlines()[-1] == "    return c"
    whole = display.source_lines(sample_fn)
    assert whole.splitlines()[0] == "def sample_fn(x):" and len(whole.splitlines()) == 5


def test_a_marker_that_is_not_in_the_source_is_an_error_naming_it():
    with pytest.raises(ValueError, match="start='# step 9'"):
        display.source_lines(sample_fn, "# step 9")
    with pytest.raises(ValueError, match="end='nowhere'"):
        display.source_lines(sample_fn, "# step 1", "nowhere")
    with pytest.raises(ValueError, match="end= needs start="):
        display.source_lines(sample_fn, end="return")
