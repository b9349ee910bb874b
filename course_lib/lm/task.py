"""The real model's task: single-digit addition asked in chat form, with an exact and a format verifier.

A question is "What is a + b?" (a, b in 0..9) in the user turn, after a short system instruction that asks
for the answer as "Answer: <number>"; the prompt is built by the model's own chat template
(``ChatLM.chat_ids``). Two verifiers read the decoded reply:

- ``exact``: the reply's last integer is a + b (chapter 12's reward, and the accuracy an RL run reports);
- ``format``: the reply states its answer where the instruction asks, "Answer: <integer>", right or wrong.

The trainer's form of the task (``ChatTask``) has a third verifier, ``random``: a reward of 1 with probability
1/2 whatever the reply says (Shao et al., "Spurious Rewards", arXiv 2506.10947), for runs that ask what
training does when the reward carries no information (``random_rewards``).

Of the tasks measured on this model (single-, two- and three-digit addition, one-step word problems), it is
the one whose sampled pass@1 at temperature 1 lies between 10% and 60%, while greedy decoding and pass@8 are
far higher (``benchmarks/real_lm_task.py`` measures where the model starts).

``ChatAdditionTask`` splits the 55 unordered pairs {a, b}: a held-out pair is never trained on in either
order or any wording, so neither a commuted twin nor another wording carries it into training. What
"held-out" does not mean: every sum 0..18 is still the answer to some training question (the split keeps
at least one pair of each sum in training), so a held-out question asks a known sum of unseen operands.

A reply falls into categories (``categories``) that separate the ways its reward can rise: finished within
the budget, formatted, exact, the right sum stated anywhere, no sum stated.
"""
from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import torch
from torch import Tensor

from .model import PROMPT_PAD, chat_ids, load_tokenizer, prompt_rows, prompt_tensor

SYSTEM = "You are a careful assistant. Solve the problem and end with 'Answer: <number>'."
WORDINGS = ("What is {a} + {b}?", "Compute {a} + {b}.", "{a} + {b} = ?")
_STATED = re.compile(r"Answer:\s*(-?\d+)")


# "3 + 4", "0 plus 7", "0 and 7", "2 + 5 + 1": a sum written out, which restates a question, not its answer
_SUM_WRITTEN = re.compile(r"-?\d+(?:\s*(?:\+|\bplus\b|\band\b)\s*-?\d+)+")


def stated_integers(text: str) -> list[int]:
    """The integers a reply states as values, in order: every integer outside a written-out sum "a + b"
    (which restates the question: "0 + 7" states no 7)."""
    return [int(x) for x in re.findall(r"-?\d+", _SUM_WRITTEN.sub(" ", text))]


def last_integer(text: str) -> int | None:
    """The last integer a reply states (``stated_integers``; the exact verifier reads it), or None."""
    found = stated_integers(text)
    return found[-1] if found else None


def stated_answer(text: str) -> int | None:
    """The integer the reply states as "Answer: <n>" (the last such statement), or None."""
    found = _STATED.findall(text)
    return int(found[-1]) if found else None


def exact(reply: str, answer: int) -> float:
    """1.0 when the last integer the reply states is the answer; a reply that only restates the question
    ("0 + 7") states none."""
    return float(last_integer(reply) == answer)


def formatted(reply: str, answer: int | None = None) -> float:
    """1.0 when the reply states an answer as asked ("Answer: <integer>"), whether or not it is right."""
    return float(stated_answer(reply) is not None)


# A reply's categories, each 0/1 (``categories``); "finished" is read from the sampler, not the text.
CATEGORIES = ("finished", "formatted", "exact", "right_sum", "no_sum")


def categories(reply: str, answer: int, finished: bool) -> dict[str, float]:
    """The categories of one reply: ``finished`` (an EOS within the budget), ``formatted`` ("Answer: <n>"),
    ``exact`` (the exact verifier's verdict), ``right_sum`` (the right sum stated anywhere, as any of its
    integers), ``no_sum`` (it states no integer at all)."""
    stated = stated_integers(reply)
    return {"finished": float(finished), "formatted": formatted(reply), "exact": exact(reply, answer),
            "right_sum": float(answer in stated), "no_sum": float(not stated)}


VERIFIERS = {"exact": exact, "format": formatted}


def random_rewards(prompts: Tensor, responses: Tensor) -> Tensor:
    """A 0/1 reward per row [B], each 1 with probability 1/2 and independent of what its reply says.

    The coins are drawn from a generator seeded by a hash of the whole batch's token ids, so the
    same batch always gets the same rewards (a run is reproducible and resumes exactly, with no
    state to store), while changing any reply in the batch redraws every coin: no reply can make
    its own reward more likely. ``prompts`` [B, Lp] and ``responses`` [B, T] are id tensors."""
    if prompts.ndim != 2 or responses.ndim != 2 or len(prompts) != len(responses):
        raise ValueError(f"random_rewards needs prompts [B, Lp] and responses [B, T] with one B, "
                         f"got {tuple(prompts.shape)} and {tuple(responses.shape)}")
    digest = hashlib.blake2b(digest_size=8)
    for ids in (prompts, responses):
        digest.update(repr(tuple(ids.shape)).encode())
        digest.update(ids.detach().to("cpu", torch.int64).contiguous().numpy().tobytes())
    gen = torch.Generator().manual_seed(int.from_bytes(digest.digest(), "little") >> 1)
    return torch.randint(0, 2, (len(responses),), generator=gen).float()


@dataclass(frozen=True)
class Questions:
    """P addition questions, each asked G times in a row (B = P * G rows, groups contiguous)."""
    texts: list[str]
    answers: list[int]
    group_size: int

    def prompts(self, model) -> list[list[int]]:
        """The chat prompts' token ids, each repeated G times (``model``: a ``lm.ChatLM``)."""
        ids = [model.chat_ids(t, SYSTEM) for t in self.texts]
        return [p for p in ids for _ in range(self.group_size)]

    def rewards(self, replies: list[str], verifier: str = "exact") -> Tensor:
        """The verifier's 0/1 verdict on each reply [B] (float)."""
        if verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {sorted(VERIFIERS)}, got {verifier!r}")
        if len(replies) != len(self.texts) * self.group_size:
            raise ValueError(f"{len(replies)} replies for {len(self.texts)} questions x G = {self.group_size}")
        want = [a for a in self.answers for _ in range(self.group_size)]
        return torch.tensor([VERIFIERS[verifier](r, a) for r, a in zip(replies, want)])


def addition_questions(n_prompts: int, group_size: int, seed: int = 0) -> Questions:
    """Single-digit sums "What is a + b?" (a, b in 0..9), drawn with a seeded generator (chapter 12)."""
    g = torch.Generator().manual_seed(seed)
    ab = torch.randint(0, 10, (n_prompts, 2), generator=g).tolist()
    return Questions([WORDINGS[0].format(a=a, b=b) for a, b in ab], [a + b for a, b in ab], group_size)


UNORDERED = tuple((a, b) for a in range(10) for b in range(a, 10))      # the 55 pairs {a, b}, a <= b
N_SUMS = len({a + b for a, b in UNORDERED})                                # 0..18: each keeps a training pair


@dataclass(frozen=True)
class ChatAdditionTask:
    """The 100 ordered pairs (a, b), a, b in 0..9, in every wording of ``WORDINGS``, split once by unordered
    pair: ``heldout_pairs`` pairs {a, b} are held out in both orders and every wording, the rest are trained
    on. The held-out pairs are drawn in a seeded order, skipping any pair whose sum no training pair would
    keep, so every sum 0..18 is asked in training. The split depends on ``split_seed`` only, so every run
    is scored on the same held-out questions."""
    heldout_pairs: int = 10
    split_seed: int = 1234

    def __post_init__(self):
        most = len(UNORDERED) - N_SUMS          # every sum keeps one pair in training
        if not 1 <= self.heldout_pairs <= most:
            raise ValueError(f"heldout_pairs must be in 1..{most} unordered pairs {{a, b}} (of {len(UNORDERED)}, "
                             f"one pair per sum 0..{N_SUMS - 1} stays in training), got {self.heldout_pairs}")

    @functools.cached_property
    def heldout_unordered(self) -> list[tuple[int, int]]:
        """The held-out pairs {a, b} as (a, b) with a <= b, sorted."""
        left = Counter(a + b for a, b in UNORDERED)         # training pairs of each sum
        held = []
        for i in torch.randperm(len(UNORDERED), generator=torch.Generator().manual_seed(self.split_seed)).tolist():
            a, b = UNORDERED[i]
            if len(held) < self.heldout_pairs and left[a + b] > 1:
                held.append((a, b))
                left[a + b] -= 1
        return sorted(held)

    def pairs(self, split: str = "train") -> list[tuple[int, int]]:
        """The split's ordered pairs (a, b), sorted: a held-out pair {a, b} gives (a, b) and (b, a)."""
        held = {p for a, b in self.heldout_unordered for p in ((a, b), (b, a))}
        everything = [(a, b) for a in range(10) for b in range(10)]
        if split == "train":
            return [p for p in everything if p not in held]
        if split == "heldout":
            return [p for p in everything if p in held]
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")

    def questions(self, split: str = "train", group_size: int = 1) -> Questions:
        """Every wording of every pair of the split, in a fixed order, each asked ``group_size`` times."""
        items = [(w.format(a=a, b=b), a + b) for a, b in self.pairs(split) for w in WORDINGS]
        return Questions([t for t, _ in items], [s for _, s in items], group_size)

    def unordered_of(self, split: str = "heldout") -> list[tuple[int, int]]:
        """The unordered pair (min, max) of each question of ``questions(split)``, in its order: the unit a
        held-out result is averaged over (a pair's orders and wordings succeed or fail together)."""
        return [(min(a, b), max(a, b)) for a, b in self.pairs(split) for _ in WORDINGS]


class ChatTask:
    """``ChatAdditionTask`` in the form the RL trainer reads (the toy's task interface): prompts as one
    left-padded id tensor (``lm.prompt_tensor``), verifiers over id tensors. A verifier decodes each reply up
    to its first EOS and scores it against the question its prompt asks; one that raises names the prompt and
    the reply. The tokenizer loads on first use, so naming the task in a config costs nothing."""
    name = "chat_addition"
    policy = "smollm2"              # the token ids are this model's
    config_fields = ("heldout_pairs",)

    def __init__(self, heldout_pairs: int = 10):
        self.split = ChatAdditionTask(heldout_pairs=heldout_pairs)
        self.verifiers = {**{name: functools.partial(self._verify, name) for name in VERIFIERS},
                          "random": random_rewards}

    @functools.cached_property
    def tokenizer(self):
        return load_tokenizer()

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @functools.cached_property
    def _questions(self) -> dict[str, Questions]:
        return {split: self.split.questions(split) for split in ("train", "heldout")}

    @functools.cached_property
    def _answers(self) -> dict[tuple, tuple[str, int]]:
        """prompt ids -> (question, answer), for every question of both splits."""
        return {tuple(chat_ids(self.tokenizer, t, SYSTEM)): (t, a)
                for q in self._questions.values() for t, a in zip(q.texts, q.answers)}

    def prompts(self, split: str = "train") -> Tensor:
        """The split's chat prompts ``[N, L]`` (``lm.PROMPT_PAD`` on the left), in ``ChatAdditionTask``'s order."""
        if split not in self._questions:
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        return prompt_tensor([chat_ids(self.tokenizer, t, SYSTEM) for t in self._questions[split].texts])

    def replies(self, responses: Tensor) -> list[str]:
        """Each response row's text up to its first EOS."""
        eos = self.tokenizer.eos_token_id
        out = []
        for row in responses.tolist():
            out.append(self.tokenizer.decode(row[:row.index(eos)] if eos in row else row))
        return out

    def question(self, prompt: list[int]) -> tuple[str, int]:
        found = self._answers.get(tuple(prompt))
        if found is None:
            raise ValueError(f"the prompt {self.tokenizer.decode(prompt)!r} asks none of the task's questions")
        return found

    def reply_categories(self, prompts: Tensor, responses: Tensor) -> dict[str, Tensor]:
        """Each reply's ``categories`` (0/1 [B] per name of ``CATEGORIES``): finished means an EOS in the row."""
        eos = self.tokenizer.eos_token_id
        rows = [categories(reply, self.question(prompt)[1], eos in row)
                for prompt, reply, row in zip(prompt_rows(prompts), self.replies(responses), responses.tolist())]
        return {name: torch.tensor([r[name] for r in rows]) for name in CATEGORIES}

    def _verify(self, name: str, prompts: Tensor, responses: Tensor) -> Tensor:
        out = []
        for prompt, reply in zip(prompt_rows(prompts), self.replies(responses)):
            text, answer = self.question(prompt)
            try:
                out.append(float(VERIFIERS[name](reply, answer)))
            except Exception as e:
                raise ValueError(f"the {name!r} verifier raised {type(e).__name__}: {e} on the prompt {text!r} "
                                 f"and the reply {reply!r}") from e
        return torch.tensor(out)

    def to_text(self, tokens) -> str:
        return self.tokenizer.decode([int(t) for t in tokens if int(t) != PROMPT_PAD])


def chat_task(cfg) -> ChatTask:
    """The chat addition task of a run config (``registry.TASKS["chat_addition"]``): one ``ChatTask`` per held-out
    size in a process (its tokenizer and prompts built once)."""
    return _chat_task(cfg.heldout_pairs)


@functools.cache
def _chat_task(heldout_pairs: int) -> ChatTask:
    return ChatTask(heldout_pairs)
