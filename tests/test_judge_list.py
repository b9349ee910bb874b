"""What `judge.py list` and `start` tell a reader: which chapters are there (read from notebooks/
at run time), which exercise to do next, the task in plain text, and one hint per mistake."""
import re

import pytest

from course_lib.judge import cli, progress
from course_lib.judge.grading import ExerciseKit, grade_file
from course_lib.judge.plaintext import UnknownLatex, markdown_to_terminal
from course_lib.judge.registry import EXERCISES, ROOT

CHAPTERS = {"00_start_here", "01_ppo_clip_and_gae", "02_group_advantages", "03_loss_aggregation",
            "04_kl_estimators", "05_ratios_and_clipping", "06_train_inference_mismatch",
            "07_toy_policy_training", "08_reading_training_curves", "09_from_toy_to_production",
            "10_splitting_the_batch", "11_long_answers", "12_real_model_tokens",
            "13_grpo_on_a_real_model", "14_the_lineage_on_a_real_model",
            "15_lora_or_full_fine_tuning"}


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A private workspace and a notebooks/ folder holding only chapter 02."""
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / "02_group_advantages.ipynb").write_text("{}")
    monkeypatch.setenv("COURSE_JUDGE_NOTEBOOKS", str(nb))
    monkeypatch.setenv("COURSE_JUDGE_WORKSPACE", str(tmp_path / "workspace"))
    return nb


def _list(capsys):
    assert cli.main(["list"]) == 0
    return capsys.readouterr().out


def test_every_exercise_names_a_real_chapter_file():
    for ex in EXERCISES.values():
        assert ex.chapter in CHAPTERS, ex.id
        assert f"(chapter {ex.chapter})" in ex.readme.read_text().splitlines()[0], ex.id
    present = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert present <= CHAPTERS, present - CHAPTERS


def test_list_marks_the_chapters_not_in_notebooks_and_picks_up_new_ones(course, capsys):
    out = _list(capsys)
    line = {row.split()[0]: row for row in out.splitlines() if re.match(r"ex\d\d_", row)}
    ch02 = [e for e in line if EXERCISES[e].chapter.startswith("02")]           # ex01, ex02, ex15
    assert {"ex01_group_advantages", "ex02_rloo"} <= set(ch02) and all("*" not in line[e] for e in ch02)
    assert all(line[e].split()[1] + " *" in line[e] for e in line if e not in ch02)
    assert "* this chapter's notebook is not in notebooks/" in out

    (course / "05_ratios_and_clipping.ipynb").write_text("{}")       # a chapter lands later
    line = {row.split()[0]: row for row in _list(capsys).splitlines()
            if re.match(r"ex\d\d_", row)}
    assert all("*" not in line[e] for e in ("ex06_gspo", "ex07_cispo", "ex08_sapo"))
    assert "*" in line["ex09_tis_mis"] and "*" in line["ex05_ppo_clip"]      # ex05 is chapter 01's


def test_list_suggests_the_next_exercise_not_yet_passed(course, capsys):
    assert "Next: `python judge.py start ex01`" in _list(capsys)
    progress.record(EXERCISES["ex01_group_advantages"], None, True)      # passed in a notebook
    assert "Next: `python judge.py start ex02`" in _list(capsys)
    progress.record(EXERCISES["ex02_rloo"], None, True)
    assert "Next: `python judge.py start ex15`" in _list(capsys)            # chapter 02's last
    progress.record(EXERCISES["ex15_reinforce_pp"], None, True)
    # chapter 02 done: the next comes from the chapters that are missing here, in chapter order
    assert "Next: `python judge.py start ex05`" in _list(capsys)            # chapter 01's first
    for ex in EXERCISES.values():
        progress.record(ex, None, True)
    assert "Every exercise has passed." in _list(capsys)


@pytest.mark.parametrize("ex_id", list(EXERCISES))
def test_start_prints_the_task_without_raw_latex(ex_id, course, capsys):
    assert cli.main(["start", ex_id]) == 0
    out = capsys.readouterr().out
    prose = re.sub(r"```.*?```", "", out, flags=re.S)                  # code blocks stay as they are
    assert "$" not in prose and "\\" not in prose, prose
    assert f"typeset in exercises/{ex_id}/README.md" in out or "README.md" in out
    # where the reference is, and that reading it ends the exercise (the file browser does not list it)
    assert f"`python judge.py solution {ex_id.split('_')[0]}` prints it" in " ".join(out.split())
    # every command and brace group of the README's formulas is one the converter knows, so nothing
    # is printed as a command's bare name ("frac{binomn-ck}{binomnk}")
    for f in (EXERCISES[ex_id].readme, EXERCISES[ex_id].hints):
        markdown_to_terminal(f.read_text(encoding="utf-8"), strict=True)


@pytest.mark.parametrize("ex_id", list(EXERCISES))
def test_hints_print_without_raw_latex(ex_id, course, capsys):
    for level in (1, 2, 3):
        assert cli.main(["hint", ex_id, "--level", str(level)]) == 0
        out = re.sub(r"```.*?```", "", capsys.readouterr().out, flags=re.S)
        assert "$" not in out and "\\" not in out, out


def test_plain_text_formulas_read_as_intended():
    assert markdown_to_terminal(r"$A_i = \frac{R_i - \bar R}{s + \varepsilon}$") == "A_i = (R_i - R̄)/(s + ε)"
    assert markdown_to_terminal(r"$\frac{1}{G-1}\sum_{j \ne i} R_j$") == "1/(G-1) Σ_{j ≠ i} R_j"
    assert markdown_to_terminal(r"$\sqrt{\frac{1}{B'} x}$") == "sqrt(1/B' x)"
    assert markdown_to_terminal("`$x$` and ```\n$y$\n```") == "`x` and ```\n$y$\n```"
    assert markdown_to_terminal(r"$1 - \frac{\binom{n-c}{k}}{\binom{n}{k}}$") == "1 - C(n-c, k)/C(n, k)"
    assert markdown_to_terminal(r"$\prod_{i=1}^{n}\left(1 - \frac{k}{i}\right)$") == "Π_{i=1}^n(1 - k/i)"
    with pytest.raises(UnknownLatex, match="overbrace"):
        markdown_to_terminal(r"$\overbrace{x}$", strict=True)


def test_max_instead_of_min_and_the_clipped_term_alone_get_different_hints():
    """The two mistakes agree on some cases; the judge shows the hint that fits most of them."""
    ex = EXERCISES["ex05_ppo_clip"]
    kit = ExerciseKit(ex)
    hints = {name: hint for name, hint, _ in kit.variants}
    for reader, other in (("max_not_min", "no_min"), ("no_min", "max_not_min")):
        res = grade_file(kit, ex.dir / "wrong" / f"{reader}.py", 60.0)
        shown = {c["hint"] for c in res["cases"] if c["hint"]}
        assert res["status"] == "failed" and res["hints"] == [hints[reader]], (reader, shown)
        assert hints[other] not in shown
