"""Deterministic synthetic training data: nothing is downloaded.

Each class has a fixed random "prototype" image (from ``seed``); a sample is its class
prototype plus Gaussian noise. The task is learnable, so the loss of a correct
training loop falls within a few dozen batches, which is what the tests check. Batches
are a pure function of (seed, worker, batch index): a restarted worker sees the same
data, and different workers see different samples (data parallelism).
"""

from __future__ import annotations

import torch


class SyntheticImages:
    def __init__(self, num_classes: int, shape: tuple[int, int, int] = (3, 32, 32),
                 seed: int = 0, noise: float = 1.0, device: torch.device | str = "cpu"):
        self.num_classes = num_classes
        self.shape = tuple(shape)
        self.seed = seed
        self.noise = noise
        # On a GPU the batches are made there: a 224 px batch drawn on one CPU thread
        # takes longer than the GPU's whole training step.
        self.device = torch.device(device)
        gen = torch.Generator().manual_seed(seed)
        self.prototypes = torch.randn(num_classes, *self.shape, generator=gen).to(self.device)

    def batch(self, batch_size: int, index: int, worker: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Images (batch_size, C, H, W) and labels (batch_size,) for one batch, on the
        device (the same numbers for the same arguments on one kind of device)."""
        gen = torch.Generator(self.device).manual_seed(
            (self.seed * 1_000_003 + worker * 7_919 + index) % (2 ** 63 - 1))
        labels = torch.randint(0, self.num_classes, (batch_size,), generator=gen,
                               device=self.device)
        noise = torch.randn(batch_size, *self.shape, generator=gen, device=self.device)
        return self.prototypes[labels] + self.noise * noise, labels
