"""Classic model architectures used as export fixtures (torchvision is not available here).

Each module builds the architecture itself; later test modules import them, e.g.
``from tests.models.resnet import resnet18``.
"""
