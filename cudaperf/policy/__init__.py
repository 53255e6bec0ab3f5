"""Policies: what writes the CUDA. The interface is in :mod:`cudaperf.policy.base`; :func:`load_policy` builds one
from a spec (``embedded``, ``hf:PATH[+ADAPTER]``, ``openai:MODEL[@URL]``, ``replay:FILE``, ``oracle``).

Importing this package imports neither torch nor transformers nor openai: each policy module does, when used.
"""

from cudaperf.policy.base import Generation, Message, Policy, PolicyError, Request, SamplingParams
from cudaperf.policy.spec import FORMS, load_policy, parse_spec

__all__ = ["FORMS", "Generation", "Message", "Policy", "PolicyError", "Request", "SamplingParams", "load_policy",
           "parse_spec"]
