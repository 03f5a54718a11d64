"""Rules every space follows when it fits a model to a data set's shape.

Downsampling rule (all CNN spaces): a space has fixed downsampling points (the stem, the first
block of some stages); a point halves the feature map only while the map's side is larger than
``HALVE_ABOVE`` (8 px), otherwise it keeps stride 1. So 28 px (Fashion-MNIST) runs 28->14->7,
32 px (CIFAR-10) 32->16->8, and 8 px (digits) never downsamples; the last map is 5-8 px unless
the space runs out of points. Stems of the ResNet-like spaces downsample only images larger
than ``STEM_HALVE_ABOVE`` (32 px), as CIFAR ResNets do.
"""

from __future__ import annotations

from hwnas.common.errors import ConfigError, Problem

MIN_IMG_SIZE = 8  # the smallest real data set (scikit-learn digits) is 8x8
HALVE_ABOVE = 8
STEM_HALVE_ABOVE = 32


def check_build_args(space: str, *, in_chans: int, num_classes: int, img_size: int) -> None:
    """Raise one ``ConfigError`` listing every bad build argument."""
    where = f"{space} build"
    problems = []
    if not isinstance(in_chans, int) or in_chans <= 0:
        problems.append(Problem(where, "in_chans must be a positive int", in_chans,
                                "pass the data set's channel count (1 for grey, 3 for RGB)"))
    if not isinstance(num_classes, int) or num_classes <= 1:
        problems.append(Problem(where, "num_classes must be an int >= 2", num_classes,
                                "pass the data set's number of classes"))
    if not isinstance(img_size, int) or img_size < MIN_IMG_SIZE:
        problems.append(Problem(where, f"img_size must be an int >= {MIN_IMG_SIZE}", img_size,
                                f"resize or pad the images to at least {MIN_IMG_SIZE} px"))
    if problems:
        raise ConfigError(problems)


def halve(side: int, above: int = HALVE_ABOVE) -> tuple[int, int]:
    """(stride, new side) at one downsampling point; odd sides round up like a padded conv."""
    if side > above:
        return 2, (side + 1) // 2
    return 1, side


def stride_plan(img_size: int, points: int, *, stem_above: int | None = None) -> list[int]:
    """Strides of ``points`` downsampling points in order; the first one is the stem's and
    uses ``stem_above`` as its threshold when given."""
    strides, side = [], img_size
    for i in range(points):
        stride, side = halve(side, stem_above if (i == 0 and stem_above) else HALVE_ABOVE)
        strides.append(stride)
    return strides
