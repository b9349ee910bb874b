"""``History``: one row of metrics per RL step, and its two file formats.

- rows JSON (``save_histories`` / ``load_histories``): ``{name: History or [History, ...]}``, each
  History as ``{"config", "rows": [{key: value}], "warm_start_s"}``, NaN written as null;
- columns JSON (``to_columns`` / ``from_columns`` / ``load_results``): the result files of
  ``benchmarks/toy_results.py``, ``{"meta", "runs": {label: [History per seed]}}`` with each History
  stored as ``{"config", "warm_start_s", "columns": {key: [value or null per row]}}`` (a third the
  size of rows).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field


@dataclass
class History:
    """One row of metrics per RL step (row 0: before RL), keys defined in ``metrics.METRICS``."""
    config: dict
    rows: list = field(default_factory=list)
    warm_start_s: float = 0.0
    final_state: dict | None = field(default=None, repr=False)   # trained weights (CPU); not saved

    def series(self, key: str):
        """(steps, values) as float lists, skipping steps where the key is missing or NaN."""
        xs, ys = [], []
        for r in self.rows:
            v = r.get(key)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                xs.append(r["step"])
                ys.append(float(v))
        return xs, ys

    def first(self, key: str) -> float:
        ys = self.series(key)[1]
        return ys[0] if ys else float("nan")

    def last(self, key: str) -> float:
        ys = self.series(key)[1]
        return ys[-1] if ys else float("nan")

    def mean(self, key: str, last_n: int | None = None) -> float:
        ys = self.series(key)[1]
        ys = ys[-last_n:] if last_n else ys
        return sum(ys) / len(ys) if ys else float("nan")

    def to_json(self) -> dict:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                 for r in self.rows]
        return {"config": self.config, "rows": clean, "warm_start_s": self.warm_start_s}

    @classmethod
    def from_json(cls, d: dict) -> "History":
        rows = [{k: (float("nan") if v is None else v) for k, v in r.items()} for r in d["rows"]]
        return cls(config=d["config"], rows=rows, warm_start_s=d.get("warm_start_s", 0.0))


def config_record(cfg) -> dict:
    """A RunConfig as the values JSON gives back (tuples become lists, so a stored run's config compares equal),
    the fields that apply to its run only (``RunConfig.stored_fields``; a callable loss is recorded by its name)."""
    stored = cfg.stored_fields()
    d = {name: v for name, v in asdict(cfg).items() if name in stored}
    if callable(d["loss"]):
        d["loss"] = getattr(d["loss"], "__name__", repr(d["loss"]))
    return json.loads(json.dumps(d))


# ---- rows format ------------------------------------------------------------------------------
def save_histories(path, histories: dict) -> None:
    """Write {name: History or [History, ...]} to a JSON file."""
    out = {name: ([h.to_json() for h in v] if isinstance(v, list) else v.to_json())
           for name, v in histories.items()}
    with open(path, "w") as f:
        json.dump(out, f)


def load_histories(path) -> dict:
    with open(path) as f:
        raw = json.load(f)
    return {name: ([History.from_json(h) for h in v] if isinstance(v, list) else History.from_json(v))
            for name, v in raw.items()}


# ---- columns format (result files) ------------------------------------------------------------
def to_columns(hist_json: dict) -> dict:
    """History JSON (one dict per row) -> columns {key: [value or None per row]}: a third the size."""
    rows = hist_json["rows"]
    keys = sorted({k for r in rows for k in r})
    cols = {k: [r.get(k) for r in rows] for k in keys}
    return {"config": hist_json["config"], "warm_start_s": hist_json.get("warm_start_s", 0.0),
            "columns": cols}


def from_columns(d: dict) -> History:
    cols = d["columns"]
    n = len(cols["step"])
    rows = [{k: v[i] for k, v in cols.items() if v[i] is not None} for i in range(n)]
    return History.from_json({"config": d["config"], "rows": rows, "warm_start_s": d["warm_start_s"]})


def load_results(path) -> tuple[dict, dict]:
    """A result file of benchmarks/toy_results.py -> (meta, {label: [History per seed]})."""
    with open(path) as f:
        raw = json.load(f)
    load = lambda h: from_columns(h) if "columns" in h else History.from_json(h)   # noqa: E731
    return raw["meta"], {label: [load(h) for h in hs] for label, hs in raw["runs"].items()}


# what a float path depends on beyond the hardware: ATen's kernels, MKL's and oneDNN's dispatch
FLOAT_PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE",
                        "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE")


def float_path_variables() -> dict[str, str]:
    """The ``FLOAT_PATH_VARIABLES`` set in this process's environment."""
    import os
    return {k: os.environ[k] for k in FLOAT_PATH_VARIABLES if k in os.environ}


def cpu_model() -> str:
    """The processor's model name ("AMD EPYC 7R13", "Apple M2", ...), or the architecture alone."""
    import platform
    import subprocess
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("model name", "Model", "Hardware"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                  text=True, timeout=5).stdout.strip() or platform.machine()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


# the instruction-set flags in /proc/cpuinfo that MKL, oneDNN and ATen choose their kernels by, per
# architecture (x86: SSE to AVX-512, AMX, FMA, F16C; Arm: Advanced SIMD, SVE, SME, half and bfloat16
# arithmetic, int8 matrix products); a CPU's other flags (virtualisation, security, power) change no float.
# Per architecture because names collide: "sme" is memory encryption on x86 and a matrix extension on Arm.
DISPATCH_FLAGS = {"x86": ("sse", "ssse3", "avx", "amx", "fma", "f16c"),
                  "arm": ("asimd", "sve", "sme", "fphp", "bf16", "i8mm")}


def dispatch_flags(flags, arch: str) -> list[str]:
    """The sorted subset of ``flags`` that kernels are chosen by on ``arch`` ("x86" or "arm")."""
    return sorted({f for f in flags if f.startswith(DISPATCH_FLAGS[arch])})


def _cpuinfo_identity(text: str) -> dict | None:
    """Linux's /proc/cpuinfo (its first processor) -> the identity ``cpu_identity`` returns, or None."""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break                                    # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "vendor_id" in fields and "flags" in fields:      # x86
        keys, arch = ("vendor_id", "cpu family", "model", "stepping"), "x86"
        flags = fields["flags"].split()
    elif "CPU implementer" in fields and "Features" in fields:     # Arm
        keys, arch = ("CPU implementer", "CPU architecture", "CPU part", "CPU revision"), "arm"
        flags = fields["Features"].split()
    else:
        return None
    if not all(fields.get(k) for k in keys):
        return None
    return {**dict(zip(("vendor", "family", "model", "stepping"), (fields[k] for k in keys))),
            "flags": dispatch_flags(flags, arch)}


def _sysctl_identity() -> dict | None:
    """macOS's sysctl -> the identity ``cpu_identity`` returns, or None: vendor, family, model and stepping
    from machdep.cpu (Intel) or hw.cpufamily / hw.cpusubfamily (Apple silicon), the flags: every instruction-set
    feature hw.optional reports present."""
    import subprocess

    def sysctl(*names: str) -> dict[str, str]:
        out = subprocess.run(["sysctl", *names], capture_output=True, text=True, timeout=5).stdout
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}

    try:
        intel = sysctl("machdep.cpu.vendor", "machdep.cpu.family", "machdep.cpu.model", "machdep.cpu.stepping")
        ident = ([intel.get(f"machdep.cpu.{k}") for k in ("vendor", "family", "model", "stepping")]
                 if "machdep.cpu.vendor" in intel else
                 ["Apple", *sysctl("hw.cpufamily", "hw.cpusubfamily").values(), "-"])
        optional = sysctl("hw.optional")
    except (OSError, subprocess.SubprocessError):
        return None
    flags = sorted(k.removeprefix("hw.optional.") for k, v in optional.items() if v == "1")
    if len(ident) != 4 or not all(ident) or not flags:
        return None
    return {**dict(zip(("vendor", "family", "model", "stepping"), ident)), "flags": flags}


def cpu_identity() -> dict | None:
    """What MKL, oneDNN and ATen choose their kernels by: the CPU's vendor, family, model and stepping and its
    instruction-set flags (``dispatch_flags``), from /proc/cpuinfo on Linux and sysctl on macOS; None where they
    cannot be read (then nothing replays here). A model name is not enough: cloud machines with different CPUs
    report the same generic name ("Intel(R) Xeon(R) Processor")."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            return _cpuinfo_identity(f.read())
    except OSError:
        pass
    return _sysctl_identity() if platform.system() == "Darwin" else None


def environment(device=None) -> dict:
    """Everything a stored run's float32 numbers depend on beyond its config: the PyTorch build
    (version, and a digest of its build configuration: BLAS, MKL and oneDNN versions), the CPU
    (its name, and ``cpu_identity``: MKL and oneDNN pick their kernels by vendor, family, model and
    instruction-set flags, ATen by its capability), the variables that steer those choices, and the
    device the run used (on CUDA also the GPU and the CUDA and cuDNN versions). A run replays digit for
    digit only where all of it is the same, the CPU's identity could be read, and the device is a CPU
    (``replays_here``); elsewhere ``toy.fingerprint`` checks it."""
    import hashlib
    import platform

    import torch
    build = hashlib.sha256(torch.__config__.show().encode()).hexdigest()[:12]
    env = {"torch": torch.__version__, "build": build, "machine": platform.machine(), "cpu": cpu_model(),
           "cpu_id": cpu_identity(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "float_path_variables": float_path_variables(),
           "device": "cpu"}
    device = torch.device(device if device is not None else "cpu")
    if device.type == "cuda":
        env.update(device=str(device), gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    return env


def replays_here(env: dict | None) -> bool:
    """Whether a run made in ``env`` gives the same float32 numbers here: only a run made on a CPU in
    this same environment, the CPU's identity (``cpu_identity``) included. A file that does not record
    that identity, or a machine that cannot read its own, replays nowhere. A CUDA run never does, even
    on the same GPU: attention's backward and cuBLAS's split reductions sum in an order that changes
    from run to run. (A file from before the device was recorded was made on a CPU.)"""
    if not env or not env.get("cpu_id"):
        return False
    env = {"device": "cpu", **env}
    return env["device"] == "cpu" and env == environment()
