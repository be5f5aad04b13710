"""Turn a validated ``ModelSpec`` into a ready model, reading its API key from the environment.

Keys come only from environment variables named in the config (``api_key_env``), never
from the config itself, so configs can be committed and shared. Errors name the
variable, never a value.

A spec may instead name a Prefect Secret block (``api_key_block``), used when the
environment variable is not set. Loading a block needs the Prefect API, which the
pipeline always has (a configured server or Prefect's temporary one), so blocks are
read only at evaluation time, inside the flow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from horizonbench.core.errors import ConfigError
from horizonbench.models.base import Model
from horizonbench.models.offline import OfflineModel
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
    if spec.provider in ("offline", "local"):
        return None
    env_name = spec.api_key_env or DEFAULT_API_KEY_ENV.get(spec.provider)
    if env_name is None and spec.api_key_block is None:
        return None
    key = environ.get(env_name, "").strip() if env_name else ""
    if not key and spec.api_key_block:
        key = _secret_block(spec)
    if not key:
        where = f"the environment variable {env_name}"
        if spec.api_key_block:
            where += f" or the Prefect Secret block {spec.api_key_block!r}"
        raise ConfigError(
            f"model {spec.name!r} (provider {spec.provider!r}) needs an API key in {where}, which is not set"
        )
    return key


def _secret_block(spec: ModelSpec) -> str:
    """The value of the spec's Prefect Secret block, or "" when there is no such block."""
    from prefect.blocks.system import Secret

    try:
        value = Secret.load(spec.api_key_block).get()
    except ValueError:  # Prefect raises ValueError for a block that does not exist
        return ""
    return str(value).strip()


#: the key an estimate's model carries: it is asked only for its identity (which never
#: includes the key), so a dry run needs no key in the environment and sends nothing
ESTIMATE_ONLY_KEY = "dry-run-sends-nothing"


def build_model(spec: ModelSpec, environ: Mapping[str, str] = os.environ, *, sends: bool = True) -> Model:
    """The model implementation for ``spec.provider``; raises ConfigError for a missing key.

    ``sends=False`` (the dry run's estimate) builds the model only for its identity, which
    keys the attempt store: no key is read, neither from the environment nor from a
    Prefect Secret block, and the model must never be asked to complete.
    """
    if spec.provider == "offline":
        return OfflineModel(spec)
    if spec.provider == "local":
        # torch loads at the first step decoded, inside LocalModel: other runs never pay for it
        from horizonbench.models.local import LocalModel

        return LocalModel(spec)
    key = api_key_for(spec, environ) if sends else ESTIMATE_ONLY_KEY
    # the SDKs are imported here, by the first API model: an offline run never pays for
    # them (about 1.7 s)
    if spec.provider in ("openai", "openai_compatible"):
        from horizonbench.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(spec, key)
    if spec.provider == "anthropic":
        from horizonbench.models.anthropic_messages import AnthropicModel

        return AnthropicModel(spec, key)
    raise ConfigError(f"model {spec.name!r}: unknown provider {spec.provider!r}")
