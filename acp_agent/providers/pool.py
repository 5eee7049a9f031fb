"""The connection's model providers, one per model spec, built on first use, and what is
known of each model: the table's facts, within what its server said, under the
configuration's overrides.

The pool owns the configuration as it stands: ``providers/set`` replaces a family's
settings for the process (:meth:`Models.set_endpoint`), ``providers/disable`` takes a
family out (:attr:`Models.disabled`), ``logout`` drops a family's providers so their next
request finds the key anew (:meth:`Models.reroute`). Nothing here knows of sessions or
ACP: a turn gets its provider behind :meth:`Models.resilient` with the announcement of
retries it is given.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from .. import log
from ..config import Config, Limits, ProviderSettings
from ..errors import ProviderError
from .models import ModelInfo, ReportsLimits, ServerLimits, with_server_limits
from .registry import FAMILIES, http_timeout, make_provider, spec

if TYPE_CHECKING:
    from .base import ModelProvider
    from .resilient import OnRetry, Resilient, RetryPolicy


@runtime_checkable
class Prepares(Protocol):
    """A provider that can ready its first request ahead of time (``_openai``,
    ``_anthropic``): called in a worker thread, never on the event loop."""

    def prepare(self, rehearse_request: bool = True) -> None: ...


@runtime_checkable
class Connects(Protocol):
    """A provider that can open its connection ahead of a prompt (``_sdk.Ahead``)."""

    async def connect(self) -> None: ...


class Models:
    def __init__(self, config: Config) -> None:
        self.config = config
        """The configuration as it stands (``providers/set`` changes a family's settings)."""
        self.disabled: set[str] = set()
        """Provider families the client disabled (``providers/disable``): their models are
        neither offered nor used."""
        self._providers: dict[str, ModelProvider] = {}
        self._retired: list[ModelProvider] = []
        self._server_limits: dict[str, ServerLimits | None] = {}
        self._prepared: set[str] = set()

    @property
    def choices(self) -> list[str]:
        """The models a session may switch between (the configured one first)."""
        seen = [self.config.model]
        for m in self.config.models:
            if m not in seen and m.partition(":")[0] not in self.disabled:
                seen.append(m)
        return seen

    def provider_for(self, model: str) -> ModelProvider:
        provider = self._providers.get(model)
        if provider is None:
            family = model.partition(":")[0]
            if family in self.disabled:
                raise ProviderError(
                    f"the client disabled the {spec(family).title} provider: {model} cannot"
                    " be used (choose another model)"
                )
            provider = self._providers[model] = make_provider(self.config, model)
        return provider

    def set_endpoint(self, family: str, settings: ProviderSettings) -> None:
        """``family``'s endpoint changed (``providers/set``): in the process only."""
        providers = {**self.config.providers, family: settings}
        self.config = msgspec.structs.replace(self.config, providers=providers)
        self.disabled.discard(family)
        self.reroute(family)

    def set_limits(self, limits: Limits) -> None:
        """New ``[limits]`` (``handlers.reload``): a family whose HTTP timeout backstop
        moves gets new providers for its next request."""
        old = self.config
        self.config = msgspec.structs.replace(old, limits=limits)
        for family in FAMILIES:
            if http_timeout(old, family) != http_timeout(self.config, family):
                self.reroute(family)

    def disable(self, family: str) -> None:
        self.disabled.add(family)
        self.reroute(family)

    def reroute(self, family: str) -> None:
        """``family``'s endpoint or key changed: its models get new providers, built for
        their next request; a turn streaming now keeps its own (closed at shutdown)."""
        for model in [m for m in self._providers if m.partition(":")[0] == family]:
            self._retired.append(self._providers.pop(model))
            self._server_limits.pop(model, None)

    def model_info_for(self, model: str) -> ModelInfo:
        """The table's facts, within what the model's server said (once asked: see
        :meth:`learn_limits`), with the configuration's override on top."""
        family, _, name = model.partition(":")
        info = spec(family).model_info(name)
        limits = self._server_limits.get(model)
        if limits is not None:
            info = with_server_limits(info, limits)
        overrides = self.config.model_overrides
        override = overrides.get(model) or overrides.get(name)
        if override is not None:
            changes = {k: v for k, v in msgspec.structs.asdict(override).items() if v is not None}
            info = msgspec.structs.replace(info, **changes)
        return info

    async def learn_limits(self, model: str) -> None:
        """Ask the model's server for its limits, once per model (a compatible server's
        window; the vendors' own APIs are not asked). Before the model's first turn, never
        on the way to ``initialize``; bounded by the provider's short discovery timeout."""
        if model in self._server_limits:
            return
        provider = self.provider_for(model)
        limits = await provider.server_limits() if isinstance(provider, ReportsLimits) else None
        if limits is not None:
            log.info("model limits from the server", model=model, window=limits.context_window,
                     exact=limits.exact, source=limits.source)  # fmt: skip
        self._server_limits[model] = limits

    async def prepare(self, model: str, rehearse: bool = True) -> None:
        """Ready ``model``'s provider for its first request (the SDK client; a rehearsal
        of a request when ``rehearse``), once, in a worker thread."""
        if model in self._prepared:
            return
        self._prepared.add(model)
        provider = self.provider_for(model)
        if isinstance(provider, Prepares):
            await asyncio.get_running_loop().run_in_executor(None, provider.prepare, rehearse)

    def connects_ahead(self, model: str) -> Connects | None:
        """``model``'s provider, if it can open its connection ahead and its family's
        ``connect-ahead`` is on."""
        provider = self.provider_for(model)
        settings = self.config.provider_settings(model.partition(":")[0])
        return provider if isinstance(provider, Connects) and settings.connect_ahead else None

    @property
    def retry_policy(self) -> RetryPolicy:
        # off the way to `initialize` (this module is on it): the turn's first request
        from .resilient import RetryPolicy

        limits = self.config.limits
        return RetryPolicy(
            max_retries=limits.max_retries,
            max_delay=limits.retry_max_delay,
            first_event_timeout=limits.first_event_timeout,
            idle_timeout=limits.idle_timeout,
        )

    def resilient(self, model: str, on_retry: OnRetry) -> Resilient:
        """``model`` behind the resilience policy, announcing each retry by ``on_retry``."""
        from .resilient import Resilient  # off the way to `initialize`, as above

        return Resilient(self.provider_for(model), self.retry_policy, on_retry)

    async def aclose(self) -> None:
        for provider in [*self._providers.values(), *self._retired]:
            try:
                await asyncio.wait_for(provider.aclose(), 0.2)
            except Exception as exc:  # shutting down: a provider that fails to close is fine
                log.debug("provider close failed", error=repr(exc))
