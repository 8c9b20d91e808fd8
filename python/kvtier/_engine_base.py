"""The engines' base classes when they are installed, `object` otherwise.

The adapters subclass SGLang's HiCacheStorage and vLLM's offloading ABCs
when the engine is importable (so isinstance checks in the engine pass), and
stand alone with the same methods when it is not (tests, other hosts).
"""

import importlib


def engine_class(module, name):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return object
