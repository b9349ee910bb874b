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


def test_rounding_noise_prints_as_a_bound_and_real_values_as_they_are():
    from course_lib.display import small, table
    assert small(-4.4e-17, "+.1e") == small(4.5e-17, "+.1e") == "< 1e-12"
    assert small(3.3e-7, ".1e", below=1e-6) == "< 1e-6"
    assert small(-2.5e-2, "+.2e") == "-2.50e-02" and small(1e-12, ".0e") == "1e-12"
    lines = table([[1, -2.9e-17], [2, 0.018]], ["seed", "loss"], ["d", "~+.1e"]).splitlines()
    assert lines[2].split() == ["1", "<", "1e-12"] and lines[3].split() == ["2", "+1.8e-02"]


def test_a_table_aligns_each_column_as_asked_and_numbers_right_by_default():
    table = display.table
    rows = [["batch", 8], ["learning rate", 0.00002]]
    assert table(rows, ["knob", "value"]).splitlines()[2:] == ["        batch      8", "learning rate  2e-05"]
    assert table(rows, ["knob", "value"], align="<>").splitlines()[2:] == ["batch              8",
                                                                         "learning rate  2e-05"]
    with pytest.raises(ValueError, match="'<' or '>' for each of the 2 columns"):
        table(rows, ["knob", "value"], align="<")


def test_mean_and_range_prints_a_few_numbers_mean_and_spread_alike():
    from course_lib.display import mean_and_range
    assert mean_and_range([0.4, 0.5, 0.3], ".3f") == "0.400 (0.200)"
    assert mean_and_range([12.0], ".1f") == "12.0"                 # one seed: no range to print
    assert mean_and_range([12.0, 12.0], ".1f") == "12.0 (0.0)"
    with pytest.raises(ValueError, match="at least one value"):
        mean_and_range([], ".3f")


def test_a_learning_rate_reads_as_configs_write_it():
    from course_lib.display import lr_text
    assert [lr_text(x) for x in (2e-5, 6e-4, 0.002, 1.5e-4, 1e-5)] == ["2e-5", "6e-4", "2e-3", "1.5e-4", "1e-5"]
