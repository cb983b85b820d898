"""The one fixed synthetic image every hf_vision model sees (the publication fed one photo; we ship none).

Generated, not stored: a 480 x 640 RGB image (COCO's common size, like the publication's cats photo) of smooth
gradients and a few filled shapes, so resizing, cropping and normalisation do real work and detection heads get edges.
Deterministic: integer arithmetic only, no RNG, identical on every machine.
"""

from __future__ import annotations

import numpy as np

HEIGHT = 480
WIDTH = 640


def synthetic_image(height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """An ``(height, width, 3)`` uint8 array, the same bytes on every call."""
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(width, dtype=np.int64)[None, :]
    red = (x * 255) // max(width - 1, 1) + 0 * y
    green = (y * 255) // max(height - 1, 1) + 0 * x
    blue = ((x + y) * 255) // max(width + height - 2, 1)
    image = np.stack([red, green, blue], axis=-1)
    # Two "objects": a disc and a rectangle in flat colours, placed relative to the size.
    disc = (y - height // 2) ** 2 + (x - width // 3) ** 2 <= (min(height, width) // 5) ** 2
    image[disc] = (200, 40, 40)
    image[height // 6 : height // 2, (2 * width) // 3 : (9 * width) // 10] = (30, 60, 190)
    # A fine checkerboard stripe at the bottom: high frequencies survive only if resizing is done right.
    stripe = (y >= (5 * height) // 6) & (((x // 8) + (y // 8)) % 2 == 0)
    image[np.broadcast_to(stripe, (height, width))] = (245, 245, 245)
    return image.astype(np.uint8)
