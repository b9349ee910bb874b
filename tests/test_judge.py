"""The judge's own behaviour: broken submissions get clear messages (never a judge traceback),
exit codes, start/reset never lose a reader's file, hints, progress, watch, notebook check."""
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course_lib.judge import cli, check, grade, registry, runner
from course_lib.judge.registry import EXERCISES, ROOT

EX01 = EXERCISES["ex01_group_advantages"]
EX07 = EXERCISES["ex07_cispo"]
EX15 = EXERCISES["ex15_reinforce_pp"]
GOOD_EX01 = EX01.solution.read_text()


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A private workspace, so tests never touch the reader's workspace/."""
    d = tmp_path / "workspace"
    monkeypatch.setenv("COURSE_JUDGE_WORKSPACE", str(d))
    return d


def write(tmp_path, name, body) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def run_cli(*args, env_ws=None, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    if env_ws is not None:
        env["COURSE_JUDGE_WORKSPACE"] = str(env_ws)
    return subprocess.run([sys.executable, "judge.py", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout)


# ------------------------------------------------------------ broken submissions, one worker

BROKEN = {
    "exception": """
        import torch
        def helper(x):
            return x.view(3, -1)          # fails for B not divisible by 3
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            return helper(rewards)
        """,
    "wrong_shape": """
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            r = rewards.view(-1, group_size)
            return r - r.mean(dim=1, keepdim=True)
        """,
    "nan": """
        import torch
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            return torch.full_like(rewards, float("nan"))
        """,
    "inplace": GOOD_EX01.replace("    return adv_grp.reshape(-1)",
                                 "    rewards -= 1.0\n    return adv_grp.reshape(-1)"),
    "returns_none": """
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            adv = rewards - rewards.mean()
        """,
    "missing_function": """
        def group_advantage(rewards, group_size, scale=True, eps=1e-6):
            return rewards
        """,
    "import_error": """
        import torch
        x = undefined_name + 1
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            return rewards
        """,
    "sys_exit": """
        import sys
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            print("about to exit")
            sys.exit(3)
        """,
    "infinite_loop": """
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            while True:
                try:
                    pass
                except Exception:
                    pass
        """,
    "prints": GOOD_EX01.replace("    r_grp = rewards.view(-1, group_size)",
                                "    print('hello from the reader')\n    r_grp = rewards.view(-1, group_size)"),
}


@pytest.fixture(scope="module")
def broken_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("broken")
    jobs = []
    for name, body in BROKEN.items():
        p = d / f"{name}.py"
        p.write_text(textwrap.dedent(body))
        jobs.append({"exercise": EX01.id, "file": str(p), "label": name,
                     "time_limit": 2.0 if name == "infinite_loop" else 10.0})
    no_grad = d / "no_grad.py"
    no_grad.write_text(EX07.solution.read_text().replace(
        "    log_ratio = torch.where(mask, logp - old_logp.detach()",
        "    logp = logp.detach()\n    log_ratio = torch.where(mask, logp - old_logp.detach()"))
    jobs.append({"exercise": EX07.id, "file": str(no_grad), "label": "no_grad", "time_limit": 10.0})
    start = time.perf_counter()
    results = runner.run_jobs(jobs, EXERCISES)
    return {r["label"]: r for r in results}, time.perf_counter() - start


def _messages(res):
    return "\n".join([res.get("error") or ""] + [c["message"] for c in res["cases"]])


def test_exception_shows_a_traceback_trimmed_to_the_readers_frames(broken_results):
    res = broken_results[0]["exception"]
    text = _messages(res)
    assert res["status"] == "failed"
    assert "Traceback (your code only)" in text and "exception.py" in text
    assert "return x.view(3, -1)" in text and "RuntimeError" in text
    assert "course_lib" not in text and "grading.py" not in text


def test_wrong_shape_is_reported_with_both_shapes(broken_results):
    text = _messages(broken_results[0]["wrong_shape"])
    assert "expected shape (4,), got shape (1, 4)" in text


def test_nan_is_reported(broken_results):
    assert "NaN" in _messages(broken_results[0]["nan"])


def test_in_place_change_of_an_input_is_reported(broken_results):
    res = broken_results[0]["inplace"]
    assert res["status"] == "failed"
    assert "changed its input `rewards` in place" in _messages(res)


def test_a_loss_without_gradient_is_reported(broken_results):
    res = broken_results[0]["no_grad"]
    assert res["status"] == "failed"
    assert "carries no gradient" in _messages(res) and "requires_grad is False" in _messages(res)


def test_returning_none_asks_about_return(broken_results):
    assert "did you forget `return`" in _messages(broken_results[0]["returns_none"])


def test_missing_function_names_what_the_file_defines(broken_results):
    res = broken_results[0]["missing_function"]
    assert res["status"] == "error"
    assert "no function called group_advantages" in res["error"] and "group_advantage)" in res["error"]


def test_error_at_import_shows_the_readers_line(broken_results):
    res = broken_results[0]["import_error"]
    assert res["status"] == "error"
    assert "x = undefined_name + 1" in res["error"] and "NameError" in res["error"]


def test_sys_exit_in_the_readers_code_fails_the_case_but_not_the_judge(broken_results):
    res = broken_results[0]["sys_exit"]
    assert res["status"] == "failed" and "SystemExit" in _messages(res)
    assert "about to exit" in res["output"]


def test_infinite_loop_is_stopped_by_the_time_limit(broken_results):
    res = broken_results[0]["infinite_loop"]
    assert res["status"] == "timeout"
    assert "time limit exceeded" in res["error"] and "2 s" in res["error"]


def test_the_jobs_after_a_timeout_still_run_and_printed_output_is_captured(broken_results):
    res = broken_results[0]["prints"]
    assert res["status"] == "passed"
    assert "hello from the reader" in res["output"]


def test_syntax_error_shows_the_readers_line_without_running_anything(tmp_path):
    p = write(tmp_path, "syn.py", """
        import torch
        def group_advantages(rewards, group_size, scale=True, eps=1e-6)
            return rewards
        """)
    res = grade(EX01, p)
    assert res["status"] == "syntax_error"
    assert "line 3" in res["error"] and "def group_advantages(rewards" in res["error"]


def test_a_process_killed_by_the_readers_code_is_reported_as_crashed(tmp_path):
    p = write(tmp_path, "kill.py", """
        import os
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            os._exit(7)
        """)
    res = grade(EX01, p)
    assert res["status"] == "crashed" and "exit code 7" in res["error"]


# ------------------------------------------------------------ command line: exit codes, output

def test_cli_exit_codes_solution_0_wrong_1_gradient_only_wrong_1_usage_2(ws):
    assert run_cli("test", "ex07", str(EX07.solution)).returncode == 0
    wrong = run_cli("test", "ex07", str(EX07.dir / "wrong" / "ppo_objective.py"))
    assert wrong.returncode == 1 and "FAIL" in wrong.stdout
    grad_only = run_cli("test", "ex07", str(EX07.dir / "wrong" / "weight_not_detached.py"))
    assert grad_only.returncode == 1
    # a gradient case failing on its gradient says so, in words of gradients, not of values
    assert "the value is right, the gradient with respect to `logp` is not" in grad_only.stdout
    assert "d/dlogp of cispo_loss(...): " in grad_only.stdout and " entries differ" in grad_only.stdout
    assert "values differ" not in grad_only.stdout
    assert "stop-gradient" in grad_only.stdout                 # its targeted hint
    assert run_cli("test", "ex99").returncode == 2
    assert run_cli("test", "ex07", "no/such/file.py").returncode == 2
    assert run_cli("frobnicate").returncode == 2
    assert run_cli("test", "ex07").returncode == 2             # no workspace file yet


def test_json_output_and_sample_mode(ws):
    proc = run_cli("--json", "test", "ex01", str(EX01.solution), "--sample")
    res = json.loads(proc.stdout)
    assert proc.returncode == 0 and res["status"] == "passed" and res["sample"]
    full = json.loads(run_cli("--json", "test", "ex01", str(EX01.solution)).stdout)
    assert 0 < res["total"] < full["total"]
    text = run_cli("test", "ex01", str(EX01.solution), "--sample").stdout
    assert "Sample cases passed" in text and "All cases passed" not in text


def test_a_failure_shows_expected_got_index_and_difference_but_not_the_reference(tmp_path):
    res = grade(EX01, EX01.dir / "wrong" / "population_std.py")
    first = next(c for c in res["cases"] if not c["passed"])
    assert "expected 0.866" in first["message"] and "first at index (0,)" in first["message"]
    assert "max abs difference" in first["message"]
    assert "std(" not in first["message"] and "unbiased" not in json.dumps(res)


def test_internal_errors_give_a_clean_message_not_a_traceback(ws, monkeypatch, capsys):
    def boom(args):
        raise KeyError("oops")
    monkeypatch.setattr(cli, "cmd_list", boom)
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "Traceback" not in err


# ------------------------------------------------------------ start / reset / hints / progress

def test_start_never_overwrites_and_reset_keeps_numbered_backups(ws, capsys):
    target = ws / f"{EX01.id}.py"
    assert cli.main(["start", "ex01"]) == 0
    assert target.read_text() == EX01.starter.read_text()
    target.write_text("# my work 1\n")
    assert cli.main(["start", "ex01"]) == 0
    assert target.read_text() == "# my work 1\n"
    assert "already exists" in capsys.readouterr().out
    assert cli.main(["reset", "ex01"]) == 0
    assert (ws / f"{EX01.id}.py.bak1").read_text() == "# my work 1\n"
    assert target.read_text() == EX01.starter.read_text()
    target.write_text("# my work 2\n")
    assert cli.main(["reset", "ex01"]) == 0
    assert (ws / f"{EX01.id}.py.bak1").read_text() == "# my work 1\n"
    assert (ws / f"{EX01.id}.py.bak2").read_text() == "# my work 2\n"


def test_hints_go_up_one_level_per_call_and_level_is_checked(ws, capsys):
    levels = []
    for _ in range(4):
        assert cli.main(["--json", "hint", "ex03"]) == 0
        levels.append(json.loads(capsys.readouterr().out)["level"])
    assert levels == [1, 2, 3, 3]
    assert cli.main(["hint", "ex03", "--level", "9"]) == 2
    capsys.readouterr()
    assert cli.main(["hint", "ex03", "--level", "1"]) == 0
    out = capsys.readouterr().out                # the same command would print level 1 again
    assert "`python judge.py hint ex03 --level 2` gives a stronger one" in out
    assert "Run the same command again" not in out


def test_each_failing_case_of_a_known_mistake_points_to_its_hint(ws):
    """The hint is printed in full once; every later case with the same mistake points to it."""
    out = run_cli("test", "ex15", str(EX15.dir / "wrong" / "per_row_stats.py")).stdout
    blocks = out.split("  FAIL  ")[1:]
    assert len(blocks) >= 8 and all("hint: " in b for b in blocks), out
    assert out.count("You whiten each response with its own statistics") == 1


def test_hint_targets_the_first_failing_case_of_the_readers_file(ws, capsys):
    """A file that fails only the equal-rewards case gets that case's message first, kept apart from the
    general ladder (whose first rung is about `.view(-1, G)`); below it, the ladder's next rung."""
    ws.mkdir()
    wrong = EX01.dir / "wrong" / "no_zero_for_equal_groups.py"
    (ws / f"{EX01.id}.py").write_text(wrong.read_text())
    assert cli.main(["--json", "hint", "ex01"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "six equal rewards" in out["case"] and out["level"] == 1
    assert "exactly 0" in out["target"] and ".view(-1" not in out["target"]
    (ws / f"{EX01.id}.py").write_text(EX01.solution.read_text())       # passes: the ladder goes on
    assert cli.main(["--json", "hint", "ex01"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["level"] == 2 and out["target"] is None


def test_a_failing_test_names_the_hint_ladder_and_hint_says_more_than_test_did(ws, capsys):
    """`test` names `hint` and its levels; `hint` then prints the ladder's next rung, which `test` did not,
    rather than the case and its known-mistake hint alone a second time."""
    ws.mkdir()
    (ws / f"{EX01.id}.py").write_text((EX01.dir / "wrong" / "population_std.py").read_text())
    assert cli.main(["test", "ex01"]) == 1
    tested = " ".join(capsys.readouterr().out.split())
    assert "`python judge.py hint ex01` (3 levels" in tested and "`--level 1` to `--level 3`" in tested
    assert cli.main(["hint", "ex01"]) == 0
    hinted = " ".join(capsys.readouterr().out.split())
    assert "general hint 1 of 3" in hinted and "one row per prompt" in hinted
    assert "one row per prompt" not in tested


def test_hint_on_a_named_file_and_a_missing_one(ws, tmp_path, capsys):
    bad = write(tmp_path, "bad.py", """
        import torch
        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            return -torch.ones_like(rewards)
        """)
    assert cli.main(["hint", "ex01", str(bad)]) == 0
    assert "first fails on" in capsys.readouterr().out
    assert cli.main(["hint", "ex01", str(tmp_path / "nope.py")]) == 2


def test_solution_prints_the_explanation_and_the_code(capsys):
    assert cli.main(["solution", "ex02"]) == 0
    out = capsys.readouterr().out
    assert "mean of the others" in out and "def rloo_advantages" in out


def test_list_shows_status_from_not_started_to_passed(ws, capsys):
    def status():
        cli.main(["--json", "list"])
        return {r["id"]: r["status"] for r in json.loads(capsys.readouterr().out)}["ex02_rloo"]
    assert status() == "not started"
    cli.main(["start", "ex02"])
    capsys.readouterr()
    assert status() == "in progress"
    (ws / "ex02_rloo.py").write_text(EXERCISES["ex02_rloo"].solution.read_text())
    assert cli.main(["test", "ex02"]) == 0
    capsys.readouterr()
    assert status() == "passed"
    (ws / "ex02_rloo.py").write_text(EXERCISES["ex02_rloo"].solution.read_text() + "\n# edit\n")
    assert status() == "in progress"


def test_watch_grades_the_file_and_stops_after_the_requested_rounds(ws, capsys):
    cli.main(["start", "ex12"])
    (ws / "ex12_adaptive_kl.py").write_text(EXERCISES["ex12_adaptive_kl"].solution.read_text())
    capsys.readouterr()
    assert cli.main(["watch", "ex12", "--rounds", "1", "--interval", "0.05"]) == 0
    assert "All cases passed" in capsys.readouterr().out


def test_doctor_reports_python_torch_device_and_gradable_exercises(capsys):
    assert cli.main(["--json", "doctor"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["torch"] and info["device"] in ("cpu", "cuda")
    assert len(info["exercises"]) == len(EXERCISES) and all(r["gradable"] for r in info["exercises"])


def test_unknown_or_ambiguous_ids_are_usage_errors():
    with pytest.raises(registry.UsageError, match="Did you mean"):
        registry.get_exercise("ex1_group")
    with pytest.raises(registry.UsageError):
        registry.get_exercise("ex")
    assert registry.get_exercise("ex10").id == "ex10_gae"


# ------------------------------------------------------------ the notebook one-liner

def test_notebook_check_grades_a_function_with_its_helpers_and_module_aliases(ws, tmp_path, capsys):
    mod_path = write(tmp_path, "nb_cell.py", """
        import torch as T
        SCALE = 1.0

        def _others_mean(r, g):
            return (r.sum(dim=1, keepdim=True) - r) / (g - 1)

        def my_rloo(rewards, group_size):
            r = rewards.view(-1, group_size)
            return (SCALE * (r - _others_mean(r, group_size))).reshape(-1)
        """)
    import importlib.util
    spec = importlib.util.spec_from_file_location("nb_cell", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = check("ex02_rloo", mod.my_rloo)
    assert res.passed, res.details
    assert "All cases passed" in capsys.readouterr().out


def test_notebook_check_explains_a_function_without_source(ws, capsys):
    ns = {}
    exec("def rloo_advantages(rewards, group_size):\n    return rewards\n", ns)
    res = check("ex02", ns["rloo_advantages"])
    assert not res.passed and "could not read the source" in res.details["error"]
    res = check("ex02", lambda rewards, group_size: rewards)
    assert not res.passed and "lambda" in res.details["error"]


# ------------------------------------------------------------ comparison messages (in-process)

def test_compare_names_shape_dtype_first_index_and_padding():
    import torch
    from course_lib.judge.grading import compare, dtype_note
    want = torch.tensor([[1.0, 2.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    assert "expected shape (1, 3), got shape (3,)" in compare(want[0], want, "f", 1e-6, 0)
    assert compare(want.double(), want, "f", 1e-6, 0) is None          # any floating dtype: a note
    assert "torch.float64 where the reference returns torch.float32" in dtype_note(want.double(), want)
    assert dtype_note(want, want) is None
    assert "values differ" in compare(want.double() + 1, want, "f", 1e-6, 0)
    assert "integer division" in compare(want.long(), want, "f", 1e-6, 0)
    msg = compare(torch.tensor([[1.0, 2.0, 5.0]]), want, "f", 1e-6, 0, mask)
    assert "first at index (0, 2) (a padding position): expected 0, got 5" in msg
    assert compare(want + 1e-7, want, "f", 1e-6, 0) is None
    assert "expected a Python float" in compare(torch.tensor(1.0), 1.0, "f", 1e-6, 0)


def test_generic_hints_recognise_a_flipped_sign_and_a_constant_factor():
    import torch
    from course_lib.judge.grading import generic_hint
    want = torch.tensor([1.0, -2.0, 0.0, 3.0])
    assert "opposite sign" in generic_hint(-want, want, "ppo_clip_loss")
    assert "minimised" in generic_hint(-want, want, "ppo_clip_loss")
    assert "2 times" in generic_hint(2 * want, want, "kl_k2")
    assert generic_hint(want + torch.tensor([0.0, 0.1, 0.0, 0.0]), want, "f") is None
