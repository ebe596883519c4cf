"""torch.utils counterparts: tfcore.utils.checkpoint (activation checkpointing)."""
from . import checkpoint  # noqa: F401
