"""The rule-based reflector's public import path: it lives in :mod:`inspo.core.reflector`, next
to the templates it reads (:mod:`inspo.core.templates`)."""

from inspo.core import reflector as _reflector
from inspo.core.reflector import *  # noqa: F403 - this module re-exports the reflector's public names
from inspo.core.templates import TRUNCATION_MARK  # noqa: F401

__all__ = [*_reflector.__all__, "TRUNCATION_MARK"]
