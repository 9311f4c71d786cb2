"""pulsar-client arguments that Sluice does not implement: refused by name, never dropped.

``Client``, ``create_producer`` and ``subscribe`` take every argument of pulsar-client's
signatures, so Pulsar code moves over unchanged.  Those Sluice implements do what pulsar-client
does; each of the others is accepted only with pulsar-client's default value (which asks for
nothing), and any other value raises ``NotSupported`` naming the argument.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.errors import NotSupported


def _is_default(value: object, default: object) -> bool:
    if value is default or value == default:
        return True
    # pulsar-client's enums (CompressionType.NONE, ProducerAccessMode.Shared, ...) are
    # recognised by name, so pulsar's own constants pass when they ask for the default.
    name = getattr(value, "name", None)
    return isinstance(default, str) and isinstance(name, str) and name == default


def refuse_unsupported(call: str, given: dict[str, tuple[object, object]]) -> None:
    """Raise ``NotSupported`` for the first argument whose value is not its default.

    ``given`` maps an argument's name to (value, pulsar-client's default); an enum default is
    written as its member's name."""
    for name, (value, default) in given.items():
        if not _is_default(value, default):
            raise NotSupported(
                f"{call}: argument {name}={value!r} is not supported by Sluice "
                f"(only its default, {default!r}, is accepted)"
            )


def refuse_non_defaults(
    call: str, defaults: Mapping[str, object], arguments: Mapping[str, object]
) -> None:
    """``refuse_unsupported`` for the arguments ``defaults`` names (in its order), their
    values taken from ``arguments`` (a call's ``locals()``, adjusted where a value must be
    normalised first)."""
    refuse_unsupported(call, {name: (arguments[name], d) for name, d in defaults.items()})
