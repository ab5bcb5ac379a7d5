"""What a GPU's model name says about it: architecture family, compute capability, MIG capability.

Boundary: a fact table keyed by model-name tokens, no NVML. NVML reports names such as
"Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA RTX 6000 Ada
Generation"; the name is split on spaces and dashes and each token is matched whole, so "A10" never
matches "A100". Family names follow GFD's nvidia.com/gpu.family values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFacts:
    family: str
    compute_major: int
    compute_minor: int
    mig_capable: bool = False


# (token pattern, facts), first match wins; ordered so that a more specific token ("ada") beats a
# generic one. Compute capabilities from NVIDIA's CUDA GPU table.
_TABLE: tuple[tuple[re.Pattern[str], ModelFacts], ...] = tuple(
    (re.compile(pattern), facts)
    for pattern, facts in (
        (r"ada", ModelFacts("ada-lovelace", 8, 9)),
        (r"g?b(100|200|300)", ModelFacts("blackwell", 10, 0, mig_capable=True)),
        (r"50[6-9]0(ti)?", ModelFacts("blackwell", 12, 0)),
        (r"g?h(100|200|800|20)(nvl)?", ModelFacts("hopper", 9, 0, mig_capable=True)),
        (r"l(4|40|40s|20|2)", ModelFacts("ada-lovelace", 8, 9)),
        (r"40[6-9]0(ti)?", ModelFacts("ada-lovelace", 8, 9)),
        (r"a(100|800|30)", ModelFacts("ampere", 8, 0, mig_capable=True)),
        (r"a(2|10|10g|16|40|2000|4000|4500|5000|5500|6000)", ModelFacts("ampere", 8, 6)),
        (r"30[5-9]0(ti)?", ModelFacts("ampere", 8, 6)),
        (r"t(4|400|600|1000)", ModelFacts("turing", 7, 5)),
        (r"20[6-8]0(ti|super)?", ModelFacts("turing", 7, 5)),
        (r"v100(s)?|titanv", ModelFacts("volta", 7, 0)),
        (r"p100", ModelFacts("pascal", 6, 0)),
        (r"p(4|6|40)", ModelFacts("pascal", 6, 1)),
    )
)


def model_tokens(model: str) -> tuple[str, ...]:
    return tuple(token for token in re.split(r"[\s\-_]+", model.lower()) if token)


def model_facts(model: str) -> ModelFacts | None:
    """Facts for an NVML model name; None for a model the table does not know."""
    tokens = model_tokens(model)
    for pattern, facts in _TABLE:
        if any(pattern.fullmatch(token) for token in tokens):
            return facts
    return None


def mig_capable(model: str) -> bool:
    facts = model_facts(model)
    return facts is not None and facts.mig_capable
