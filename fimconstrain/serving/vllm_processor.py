"""The FIM constraint as a vLLM logits processor: the plugin that vLLM loads, for either model
runner.

vLLM's structured-output backends mask from a fixed set of grammar engines and know no right
context, so a FIM constraint (paper 004: ``prefix + middle + suffix`` must stay completable)
has to be a custom logits processor.  Per request, ``SamplingParams.extra_args`` (the
OpenAI-compatible server's ``vllm_xargs``) carries ``fim_prefix``, ``fim_suffix`` and optionally
``fim_python_version`` and ``fim_top_k``; a request without ``fim_prefix`` is left alone, and a
bad value fails the request at admission (:meth:`VllmFimProcessor.validate_params`).

Both of vLLM's model runners load every class of the ``vllm.logits_processors`` entry-point
group, and each insists on its own interface: V2 checks that the class is a subclass of its
``LogitsProcessor`` and builds it with ``(vllm_config, req_states)``; V1 builds it with
``(vllm_config, device, is_pin_memory)``.  :class:`VllmFimProcessor` is a subclass of both
interfaces (of those this vLLM has) and, when built, returns the runner's own processor
(:class:`.vllm_runner_v1.FimProcessorV1` or :class:`.vllm_runner_v2.FimProcessorV2`).  Installing
this package never breaks an engine: a processor that cannot be built (no tokenizer, an
interface this package does not know) is logged and replaced by one that changes nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .requests import FimArgs

if TYPE_CHECKING:
    from vllm.sampling_params import SamplingParams

#: under vLLM's own logger, so that its handlers print what this plugin logs
logger = logging.getLogger("vllm.fimconstrain")


def _interfaces() -> tuple[type, ...]:
    """The logits-processor base classes of the runners this vLLM has (V1, V2)."""
    bases: list[type] = []
    try:
        from vllm.v1.sample.logits_processor import LogitsProcessor as V1
    except ImportError:
        pass
    else:
        bases.append(V1)
    try:
        from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as V2
    except ImportError:
        pass
    else:
        bases.append(V2)
    return tuple(bases)


def build_for_runner(vllm_config: Any, *runner_args: Any) -> Any:
    """The processor of the runner whose arguments these are: V1's ``(device, is_pin_memory)``
    or V2's ``(req_states)``; a :class:`Passthrough` when it cannot be built."""
    try:
        if len(runner_args) == 2:
            from .vllm_runner_v1 import FimProcessorV1

            return FimProcessorV1(vllm_config, *runner_args)
        if len(runner_args) == 1:
            from .vllm_runner_v2 import FimProcessorV2

            return FimProcessorV2(vllm_config, *runner_args)
        raise TypeError(f"built with {len(runner_args) + 1} arguments, by a model runner it does not know")
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        logger.error("fimconstrain: FIM requests will NOT be constrained: %s", reason)
        return Passthrough()


class VllmFimProcessor(*_interfaces()):  # type: ignore[misc]
    """The plugin class: builds the processor of the runner that loads it (see the module)."""

    def __new__(cls, vllm_config: Any, *runner_args: Any) -> Any:
        return build_for_runner(vllm_config, *runner_args)

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        FimArgs.from_extra_args(sampling_params.extra_args)


class Passthrough:
    """A processor for either runner that changes nothing: what an engine gets when the FIM
    processor cannot be built, so that it still starts and serves."""

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: object) -> None:
        pass

    def add_request(self, req_idx: int, sampling_params: object) -> bool:
        return False

    def apply_staged_writes(self) -> None:
        pass

    def apply(self, logits: Any, ctx: object = None) -> Any:
        return logits
