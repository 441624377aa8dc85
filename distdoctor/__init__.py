"""distdoctor: diagnose and fix distributed PyTorch training failures."""

__version__ = "0.1.0"
