"""attn-kit: practice kit for the attention coding screen."""

__version__ = "0.1.0"
