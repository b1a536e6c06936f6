"""GRPO training with co-evolving instructions, on TRL (heavy imports stay inside functions).

The package is also :func:`inspo.api.train`: ``inspo.train(config)`` (or ``from inspo import
train``, then ``train(config)``) runs ``inspo train`` on ``config``. A package and a function
cannot share the name ``inspo.train`` (importing any ``inspo.train.*`` module would replace the
function with the package), so the package itself is callable.
"""

import sys as _sys
import types as _types


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        from inspo.api import train

        return train(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
