"""The model table: parameter counts of the models jobs may name, and eq. 2/3 counting.

Parameter counts are the TRUE counts (weights and biases, as torchvision/timm report
them), not Table I of the Proteus paper, which swaps ResNet18 and ResNet50. The
paper's eight models, the Tiresias-trace models (vgg19, resnet101, resnet152,
inception4; the trace's ``inception3`` is Inception_V3) and ``smallcnn``, the small CNN
the PS runtime trains on the CPU, counted from its layers with eq. 2 and 3.

Lookup is case-insensitive and ignores ``_``, ``-`` and spaces, plus a few aliases:
``ResNet18``, ``resnet_18``, ``inception_v3``, ``Inception3`` all work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable


BYTES_PER_PARAM = 4            # float32 parameters and gradients


@dataclass(frozen=True)
class Layer:
    kind: str                 # "conv" or "fc"
    c_in: int
    c_out: int
    k: int = 1                # conv kernel size K
    h: int = 1                # fc input height H
    w: int = 1                # fc input width W


@dataclass(frozen=True)
class Model:
    name: str          # canonical name used in profiles and reports
    params: int        # trainable parameters
    note: str = ""


def params_of(model: str, layers: Iterable[Layer] | None = None) -> int:
    """Parameters of a job's model: counted from ``layers`` when given (eq. 2, 3), else
    the model table's count for ``model`` (a canonical name)."""
    if layers is not None:
        return count_params(layers)
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}")
    return MODELS[model].params


def count_params(layers: Iterable[Layer]) -> int:
    """Eq. 2 (conv: C_in*C_out*K^2) plus eq. 3 (fc: H*W*C_in*C_out), summed.

    Like the paper, biases are not counted: the count is what a PS job pushes and pulls
    up to a negligible term."""
    total = 0
    for layer in layers:
        if layer.kind == "conv":
            total += layer.c_in * layer.c_out * layer.k * layer.k
        elif layer.kind == "fc":
            total += layer.h * layer.w * layer.c_in * layer.c_out
        else:
            raise ValueError(f"unknown layer kind {layer.kind!r} (conv or fc)")
    return total


# The PS runtime's small CNN (28x28x1 input, MNIST-sized): two 3x3 convolutions with 2x2
# pooling after each, then two fully connected layers. The PS runtime builds its torch
# module from this list, so the scheduler's count and the bytes on the wire agree.
SMALLCNN_LAYERS: tuple[Layer, ...] = (
    Layer("conv", c_in=1, c_out=32, k=3),
    Layer("conv", c_in=32, c_out=64, k=3),
    Layer("fc", h=7, w=7, c_in=64, c_out=128),
    Layer("fc", h=1, w=1, c_in=128, c_out=10),
)

MODELS: dict[str, Model] = {m.name: m for m in (
    # The Proteus paper's eight (Table I, ResNet18/50 corrected).
    Model("alexnet", 61_100_840),
    Model("resnet18", 11_689_512),
    Model("resnet50", 25_557_032),
    Model("googlenet", 6_624_904),
    Model("densenet121", 7_978_856),
    Model("vgg11", 132_863_336),
    Model("vgg16", 138_357_544),
    Model("inception_v3", 27_161_264),
    # The Tiresias 60-job trace adds these.
    Model("vgg19", 143_667_240),
    Model("resnet101", 44_549_160),
    Model("resnet152", 60_192_808),
    Model("inception_v4", 42_679_816, "timm inception_v4"),
    # The PS runtime's own model.
    Model("smallcnn", count_params(SMALLCNN_LAYERS), "counted from SMALLCNN_LAYERS (eq. 2, 3)"),
)}

# normalised spelling -> canonical name (canonical names map to themselves below)
_ALIASES = {
    "inception3": "inception_v3", "inceptionv3": "inception_v3",
    "inception4": "inception_v4", "inceptionv4": "inception_v4",
    "densenet": "densenet121", "inceptionv1": "googlenet",
}


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


_LOOKUP = {**{_normalise(n): n for n in MODELS}, **_ALIASES}


def canonical_name(name: str) -> str | None:
    """The canonical model name for any accepted spelling, or None if unknown."""
    if not isinstance(name, str):
        return None
    return _LOOKUP.get(_normalise(name))


def known_models() -> list[str]:
    return sorted(MODELS)
