"""The transformer workload as a u-muP model tags it, for lr-scaled optimizers (graphcore's unit_scaling).

u-muP optimizers scale each parameter's learning rate from metadata the parameter itself carries:
``mup_type`` (``weight``, ``bias``, ``norm`` or ``output``) and ``mup_scaling_depth`` (None, or the
depth of the residual stack it belongs to). ``Workload.meta`` sets these attributes on every
materialised parameter, as ``unit_scaling.Parameter`` does, following unit_scaling's own modules:

* ``uu.Embedding``: the embedding is a ``weight``; ``uu.Linear``: hidden (and LoRA) weights are
  ``weight``, their biases ``bias``; ``uu.RMSNorm``/``uu.LayerNorm``: norm gains are ``norm``;
  ``uu.LinearReadout``: the readout ``head.weight`` (added here; the transformer has none) is
  ``output``.
* ``uu.DepthSequential`` (what ``uu.TransformerStack`` is) sets ``mup_scaling_depth`` to its number of
  layers on every parameter inside it: here every ``layers.{i}.*``; the embedding, the adapters and
  the readout are outside the stack (depth None).

Kept from the transformer (same values, same bits): parameters whose grad is None on some steps
(``adapter.lora_a``), non-contiguous ones (``down_proj``, ``adapter.lora_b``). Left out: the frozen
``rotary.inv_freq`` (a buffer, never a u-muP parameter), the 0-dim ``logit_scale`` (u-muP has no
0-dim type: a 0-dim ``weight`` has no fan-in, an error input of suites/suite/umup.yaml) and the 1-D
zero-size ``head.pad.weight`` (a zero fan-in), replaced by a zero-size ``(0, width)`` weight last
(#100701). ``umup_plain`` adds ``extra.pos_embed.weight``, a parameter without metadata (from a
regular ``nn.Module``), for ``allow_non_unit_scaling_params``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from optbench.workloads.model import ParamSpec, Workload
from optbench.workloads.transformer import generate as transformer_generate
from optbench.workloads.transformer import initial_values, scaled_normal

LEFT_OUT = frozenset({"layers.0.attn.rotary.inv_freq", "layers.0.attn.logit_scale", "head.pad.weight"})
PLAIN = "extra.pos_embed.weight"  # no u-muP metadata: a parameter of a regular nn.Module
EXTRA_STREAM = 0x756D7570  # the added parameters' own random stream ("umup"), so the transformer's stay bit for bit


def mup_meta(name: str, layers: int) -> dict:
    """What ``unit_scaling.Parameter`` (and ``uu.DepthSequential``) set on the parameter ``name``."""
    leaf = name.rsplit(".", 1)[-1]
    mup_type = ("output" if name == "head.weight" else "bias" if leaf == "bias"
                else "norm" if "norm" in name else "weight")
    return {"mup_type": mup_type, "mup_scaling_depth": layers if name.startswith("layers.") else None}


def generate(*, seed: int, steps: int, width: int = 32, layers: int = 2, vocab: int = 64,
             grad_log10_range: tuple[float, float] = (-8.0, 2.0), plain: bool = False, **_) -> Workload:
    """The u-muP-tagged workload (``plain``: plus one parameter without metadata), deterministic in ``seed``."""
    base = transformer_generate(seed=seed, steps=steps, width=width, layers=layers, vocab=vocab,
                                grad_log10_range=grad_log10_range)
    kept = base.restricted(lambda spec: spec.name not in LEFT_OUT)
    extra = [ParamSpec("head.weight", (vocab, width), init_std=1.0)]
    if plain:
        extra.append(ParamSpec(PLAIN, (16, width), init_std=1.0))
    extra.append(ParamSpec("head.pad.weight", (0, width)))  # zero-size, last (#100701)
    rng = np.random.default_rng([seed, EXTRA_STREAM])
    init = {**kept.init, **initial_values(rng, extra)}
    init = {s.name: init[s.name] for s in (*kept.specs, *extra)}
    grads = tuple({**{s.name: g[s.name] for s in kept.specs},
                   **{s.name: scaled_normal(rng, s.shape, grad_log10_range) for s in extra}}
                  for g in base.grads)
    specs = (*kept.specs, *extra)
    meta = {s.name: mup_meta(s.name, layers) for s in specs if s.name != PLAIN}
    notes = ("u-muP metadata (mup_type, mup_scaling_depth) on every parameter" + (f" but {PLAIN}" if plain else ""),
             "zero-size parameter last (#100701)", "grad None every 3rd step", "non-contiguous parameters")
    return Workload("umup_plain" if plain else "umup", specs, init, grads, notes=notes, meta=meta)


GENERATORS: dict[str, Callable[..., Workload]] = {
    "umup": lambda **kw: generate(**kw),
    "umup_plain": lambda **kw: generate(plain=True, **kw),
}
