"""Turn a validated ``ModelSpec`` into a ready model, reading its API key from the environment.

Keys come only from environment variables named in the config (``api_key_env``), never
from the config itself, so configs can be committed and shared. Errors name the
variable, never a value.

Prefect Secret blocks are deliberately not consulted: loading a block needs the Prefect
API (a server, or an ephemeral one Prefect would start), and building a model must work
offline and without side effects. Export the secret into the environment instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from horizonbench.core.errors import ConfigError
from horizonbench.models.anthropic_messages import AnthropicModel
from horizonbench.models.base import Model
from horizonbench.models.offline import OfflineModel
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.schemas.config import ModelSpec

#: where the key is looked up when a spec names no ``api_key_env``
DEFAULT_API_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


def api_key_for(spec: ModelSpec, environ: Mapping[str, str] = os.environ) -> str | None:
    """The key a spec needs, or None when it needs none.

    A key is required for ``openai`` and ``anthropic``, and for any provider whose spec
    names ``api_key_env`` explicitly (naming one says the server wants it). A compatible
    server without ``api_key_env`` gets no key (the client sends a placeholder).
    """
    if spec.provider == "offline":
        return None
    env_name = spec.api_key_env or DEFAULT_API_KEY_ENV.get(spec.provider)
    if env_name is None:
        return None
    key = environ.get(env_name, "").strip()
    if not key:
        raise ConfigError(
            f"model {spec.name!r} (provider {spec.provider!r}) needs an API key in the "
            f"environment variable {env_name}, which is not set"
        )
    return key


def build_model(spec: ModelSpec, environ: Mapping[str, str] = os.environ) -> Model:
    """The model implementation for ``spec.provider``; raises ConfigError for a missing key."""
    if spec.provider == "offline":
        return OfflineModel(spec)
    key = api_key_for(spec, environ)
    if spec.provider in ("openai", "openai_compatible"):
        return OpenAIChatModel(spec, key)
    if spec.provider == "anthropic":
        return AnthropicModel(spec, key)
    raise ConfigError(f"model {spec.name!r}: unknown provider {spec.provider!r}")
