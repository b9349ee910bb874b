"""Chapter 13's TRL recipe (course_lib.lm.trl_recipe) without TRL: its reward functions give the task's verdicts on
completions in TRL's conversational shape, in the order of to_trl's reward_weights; its prompts are the turns the
course's chat prompts render. tests/peers/test_trl_real.py trains TRL's GRPOTrainer with them."""
from course_lib import frameworks as fw
from course_lib.lm import trl_recipe
from course_lib.lm.task import SYSTEM, exact, formatted
from course_lib.rl.config import make_config

REPLIES = ["3 + 4 = 7. Answer: 7", "Answer: 8", "0 + 7", "The sum is 7.", "nothing"]


def test_the_reward_functions_are_the_tasks_verdicts_in_trl_shape():
    completions = [[{"role": "assistant", "content": r}] for r in REPLIES]
    answers = [7, 8, 7, 7, 7]                                  # each completion is graded against its own answer
    assert trl_recipe.exact_reward(completions, answer=answers, prompts=None) == [
        exact(r, a) for r, a in zip(REPLIES, answers)]
    assert trl_recipe.format_reward(completions, answer=answers) == [formatted(r) for r in REPLIES]
    assert trl_recipe.exact_reward(completions, answers) == [1.0, 1.0, 0.0, 1.0, 0.0]


def test_the_reward_functions_follow_to_trls_weights():
    for cfg in (make_config("real"), make_config("real", format_weight=0.0)):
        weights = dict((k, v) for k, v, _ in fw.to_trl(cfg)).get("reward_weights", [1.0])
        funcs = trl_recipe.reward_funcs(cfg)
        assert len(funcs) == len(weights) and funcs[0] is trl_recipe.exact_reward
        if cfg.format_weight:
            assert weights == [1.0, cfg.format_weight] and funcs[1] is trl_recipe.format_reward


def test_a_prompt_is_the_system_and_user_turns():
    assert trl_recipe.chat_prompt("What is 1 + 2?") == [{"role": "system", "content": SYSTEM},
                                                        {"role": "user", "content": "What is 1 + 2?"}]
