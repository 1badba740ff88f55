"""Specs from Python values: dicts and keywords, as well as messages and text.

Every place the client takes a spec accepts, interchangeably,

  * a phasor.v1 message: EncoderSpec, or the TemporalSpec / PositionalSpec /
    RopeSpec inside it;
  * its protobuf text format ("temporal { time { dim: 8 } }");
  * a dict with the proto's field names, nested as the messages are:
      {"time": {"dim": 8, "origin": "unix_epoch"},
       "calendar": {"time_zone": "Europe/Berlin",
                    "fields": ["hour_of_day", "day_of_week"]}}
    either wrapped ({"temporal": {...}}, {"rope": {...}}) or bare, the kind
    then read from its keys.

Dict rules: enum values by name, case-insensitively ("hour_of_day",
"HOUR_OF_DAY"), or by number; a message field set to True or {} is switched
on with its defaults (content=True); None leaves a field unset; repeated
fields take lists; a *_ns field also takes a datetime, numpy datetime64,
pandas Timestamp or ISO string (tz-aware or UTC). An unknown key or enum name
is InvalidInputError naming the path ("spec.temporal.calendar.fields[1]") and
listing what is allowed.

Thread-safety: pure functions; returned messages are new objects.
"""

from typing import Any, Mapping, Optional, Union

import numpy as np
from google.protobuf import message as _message
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor

from . import _stubs
from .errors import InvalidInputError

pb = _stubs.load().encoder_pb2

SpecLike = Union[None, str, Mapping[str, Any], _message.Message]

# EncoderSpec's oneof members and the message each wraps.
_KINDS = {"temporal": pb.TemporalSpec, "positional": pb.PositionalSpec,
          "rope": pb.RopeSpec, "relative_bias": pb.RelativeBiasSpec}
# TemporalSpec's fields, in output order, as keyword arguments.
TEMPORAL_BLOCKS = ("content", "time", "time2vec", "gaps", "calendar",
                   "combine", "d_model")


def _enum_value(field: FieldDescriptor, value: Any, path: str) -> int:
    enum = field.enum_type
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if enum.values_by_number.get(int(value)) is None:
            raise InvalidInputError(path, f"{value} is not a {enum.name}")
        return int(value)
    if isinstance(value, str):
        match = enum.values_by_name.get(value.strip().upper())
        if match is not None:
            return match.number
    names = ", ".join(v.name.lower() for v in enum.values if v.number != 0)
    raise InvalidInputError(path, f"{value!r} is not a {enum.name}; one of "
                                  f"{names} (any case)")


def _time_ns(value: Any, path: str) -> int:
    """int ns since the epoch from an int or a datetime-like."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    try:
        import pandas as pd
        stamp = pd.Timestamp(value)
    except (ImportError, TypeError, ValueError) as error:
        raise InvalidInputError(path, f"{value!r} is not a time: "
                                      f"{error}") from None
    if stamp is pd.NaT:
        raise InvalidInputError(path, "NaT is not a time")
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return int(stamp.value)


def _scalar(field: FieldDescriptor, value: Any, path: str) -> Any:
    cpp = field.cpp_type
    try:
        if field.type == FieldDescriptor.TYPE_ENUM:
            return _enum_value(field, value, path)
        if cpp == FieldDescriptor.CPPTYPE_BOOL:
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"expected True or False, got {value!r}")
            return bool(value)
        if cpp in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
                   FieldDescriptor.CPPTYPE_UINT32,
                   FieldDescriptor.CPPTYPE_UINT64):
            if field.name.endswith("_ns"):
                return _time_ns(value, path)
            if isinstance(value, (bool, np.bool_)) or not float(value).is_integer():
                raise TypeError(f"expected an integer, got {value!r}")
            return int(value)
        if cpp in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
            if isinstance(value, (bool, np.bool_, str)):
                raise TypeError(f"expected a number, got {value!r}")
            return float(value)
        if cpp == FieldDescriptor.CPPTYPE_STRING:
            if not isinstance(value, str):
                raise TypeError(f"expected a string, got {value!r}")
            return value
    except InvalidInputError:
        raise
    except (TypeError, ValueError) as error:
        raise InvalidInputError(path, str(error)) from None
    raise InvalidInputError(path, f"unsupported field type {field.type}")


def fill(message: _message.Message, value: Any, path: str) -> _message.Message:
    """Sets `message` from a dict, True/{}, text format or a message of its
    type (see the module docstring); returns it."""
    if value is True:
        message.SetInParent()
        return message
    if isinstance(value, type(message)):
        message.CopyFrom(value)
        return message
    if isinstance(value, str):
        try:
            text_format.Parse(value, message)
        except text_format.ParseError as error:
            raise InvalidInputError(path, f"text format: {error}") from None
        return message
    if isinstance(value, _message.Message):
        raise InvalidInputError(path, f"expected a {message.DESCRIPTOR.name}, "
                                      f"got a {value.DESCRIPTOR.name}")
    if not isinstance(value, Mapping):
        raise InvalidInputError(path, f"expected a dict, True, text or a "
                                      f"{message.DESCRIPTOR.name}, got "
                                      f"{type(value).__name__}")
    message.SetInParent()
    fields = message.DESCRIPTOR.fields_by_name
    for key, item in value.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None and isinstance(key, str):
            field = fields.get(key.lower())
        child = f"{path}.{key}"
        if field is None:
            raise InvalidInputError(child, f"{message.DESCRIPTOR.name} has no "
                                           f"field {key!r}; fields: "
                                           f"{', '.join(fields)}")
        if item is None:
            continue
        if field.label == FieldDescriptor.LABEL_REPEATED:
            if isinstance(item, (str, Mapping)) or not hasattr(item, "__iter__"):
                item = [item]
            target = getattr(message, field.name)
            del target[:]
            for index, element in enumerate(item):
                element_path = f"{child}[{index}]"
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    fill(target.add(), element, element_path)
                else:
                    target.append(_scalar(field, element, element_path))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if item is False:
                message.ClearField(field.name)
                continue
            sub = getattr(message, field.name)
            sub.Clear()
            fill(sub, item, child)
        else:
            setattr(message, field.name, _scalar(field, item, child))
    return message


def _guess_kind(value: Mapping[str, Any], kind: Optional[str]) -> str:
    """The EncoderSpec member a bare dict fills, from its keys."""
    keys = {k.lower() for k in value if isinstance(k, str)}
    fitting = [name for name, cls in _KINDS.items()
               if keys <= set(cls.DESCRIPTOR.fields_by_name)]
    if kind in fitting or (kind and not keys):
        return kind
    if len(fitting) == 1:
        return fitting[0]
    raise InvalidInputError(
        "spec", f"cannot tell which spec {sorted(keys)} is: wrap it as "
                f"{{'temporal': ...}}, {{'positional': ...}} or {{'rope': ...}}")


def encoder_spec(spec: SpecLike, kind: Optional[str] = None) -> Optional[pb.EncoderSpec]:
    """An EncoderSpec from a message, text, or dict (None stays None).

    kind ("temporal", "positional", "rope") is the method's spec, used to
    wrap bare TemporalSpec/PositionalSpec/RopeSpec messages, text that is
    not an EncoderSpec, and dicts whose keys fit several kinds.
    """
    if spec is None:
        return None
    if isinstance(spec, pb.EncoderSpec):
        return spec
    for name, cls in _KINDS.items():
        if isinstance(spec, cls):
            out = pb.EncoderSpec()
            getattr(out, name).CopyFrom(spec)
            return out
    if isinstance(spec, str):
        out = pb.EncoderSpec()
        try:
            return text_format.Parse(spec, out)
        except text_format.ParseError as error:
            if kind is None:
                raise InvalidInputError("spec", f"text format: "
                                                f"{error}") from None
            bare = pb.EncoderSpec()
            try:
                text_format.Parse(spec, getattr(bare, kind))
            except text_format.ParseError:
                raise InvalidInputError("spec", f"text format: "
                                                f"{error}") from None
            return bare
    if isinstance(spec, Mapping):
        keys = {k.lower() for k in spec if isinstance(k, str)}
        out = pb.EncoderSpec()
        if keys and keys <= set(_KINDS):
            return fill(out, spec, "spec")
        name = _guess_kind(spec, kind)
        fill(getattr(out, name), spec, f"spec.{name}")
        return out
    raise InvalidInputError("spec", f"expected an EncoderSpec, its text, or a "
                                    f"dict; got {type(spec).__name__}")


def temporal_spec(spec: SpecLike = None, **blocks: Any) -> pb.TemporalSpec:
    """A TemporalSpec from `spec` (message, text or dict, any of which may
    be None) with the keyword blocks set on top: content, time, time2vec,
    gaps, calendar (dicts, True, text or messages), combine ("concat",
    "sum"), d_model. A block given as a keyword replaces the spec's.

        temporal_spec(time={"dim": 8}, calendar={
            "time_zone": "Europe/Berlin", "fields": ["hour_of_day"]})
    """
    unknown = set(blocks) - set(TEMPORAL_BLOCKS)
    if unknown:
        raise InvalidInputError(
            "spec", f"unknown temporal block(s) {sorted(unknown)}; blocks: "
                    f"{', '.join(TEMPORAL_BLOCKS)}")
    out = pb.TemporalSpec()
    whole = encoder_spec(spec, "temporal")
    if whole is not None:
        if whole.WhichOneof("kind") != "temporal":
            raise InvalidInputError("spec", "expected a temporal spec, got "
                                            f"{whole.WhichOneof('kind')}")
        out.CopyFrom(whole.temporal)
    fill(out, {k: v for k, v in blocks.items() if v is not None},
         "spec.temporal")
    return out


def temporal_config(spec: SpecLike, profile: Optional[str],
                    blocks: Mapping[str, Any]) -> Optional[pb.EncoderSpec]:
    """The EncoderSpec a temporal method sends: None for a profile, else
    spec plus keyword blocks. Blocks with a profile are an error (the
    profile's spec lives on the server)."""
    given = {k: v for k, v in blocks.items() if v is not None}
    if profile:
        if given or spec is not None:
            raise InvalidInputError(
                "profile", f"a profile carries its own spec; drop "
                           f"{'spec=' if spec is not None else ''}"
                           f"{', '.join(f'{k}=' for k in given)}")
        return None
    if spec is None and not given:
        raise InvalidInputError("spec", "give spec=, profile= or blocks "
                                        "(time=, gaps=, calendar=, ...)")
    return pb.EncoderSpec(temporal=temporal_spec(spec, **given))
