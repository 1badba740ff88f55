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
pandas Timestamp or ISO string (tz-aware or UTC). An unknown key or enum name,
or two members of one oneof, is InvalidInputError naming the path
("spec.temporal.calendar.fields[1]") and listing what is allowed.

RoPE: rope_config builds the spec of the RoPE methods' keywords (apply_rope,
rope_tables, describe) with the same checks, its scaling= taking a
RopeScaling dict or HF's own rope_scaling / rope_parameters dict;
rope_spec_from_hf reads a whole HF transformers config.json.

Thread-safety: pure functions; returned messages are new objects.
"""

from typing import Any, Mapping, Optional, Sequence, Tuple, Union

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
    chosen = {}  # oneof name -> the key that set it
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
        oneof = field.containing_oneof
        if oneof is not None and oneof.name == f"_{field.name}":
            oneof = None  # proto3 `optional`'s synthetic oneof
        if oneof is not None and oneof.name in chosen:
            raise InvalidInputError(
                child, f"{message.DESCRIPTOR.name}.{oneof.name} is one of "
                       f"{', '.join(f.name for f in oneof.fields)}; "
                       f"{chosen[oneof.name]!r} is already given")
        if oneof is not None:
            chosen[oneof.name] = key
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


# --- RoPE -------------------------------------------------------------------
#
# HF transformers' RoPE configs are read as HF's own
# src/transformers/modeling_rope_utils.py (main) reads them:
# RotaryEmbeddingConfigMixin.convert_rope_params_to_dict and
# standardize_rope_params choose the dict and fill it from the config's top
# level, and each _compute_<rope_type>_rope_parameters reads its keys.
# RopeScaling's messages use HF's parameter names (encoder.proto), so the keys
# of a rope type are the fields of its message.

# HF's rope_type -> the RopeScaling member it fills (None: plain RoPE). Two
# older names that HF's model configs rename on load: "mrope" (Qwen2VLConfig:
# default RoPE with mrope_section) and "su" (Phi3Config: longrope).
_HF_ROPE_TYPES = {"default": None, "linear": "linear", "dynamic": "dynamic",
                  "yarn": "yarn", "longrope": "longrope", "llama3": "llama3",
                  "proportional": "proportional", "mrope": None,
                  "su": "longrope"}
_HF_SUPPORTED = ("default, linear, dynamic, yarn, longrope, llama3, "
                 "proportional (older names: mrope = default, su = longrope)")
# Keys of every rope type's dict besides its scaling parameters: RopeSpec
# fields, and partial_rotary_factor, which sets rotary_dim (for proportional
# it is one of the scaling parameters instead).
_HF_COMMON_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor",
                   "mrope_section", "mrope_interleaved")
# RotaryEmbeddingConfigMixin.default_theta.
_HF_DEFAULT_THETA = 10000.0
# Top-level keys that say a config holds its text model's RoPE itself rather
# than in text_config (multimodal configs, e.g. Gemma 3's).
_HF_TEXT_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "head_dim",
                 "hidden_size", "max_position_embeddings")
# The layer types of Gemma 3's config before rope_parameters: sliding layers
# at rope_local_base_freq with plain RoPE, full-attention layers at
# rope_theta with rope_scaling (Gemma3TextConfig, modeling_gemma3.py).
_GEMMA3_LAYER_TYPES = ("full_attention", "sliding_attention")

_ROPE_FIELDS = pb.RopeSpec.DESCRIPTOR.fields_by_name


def _scaling_fields(kind: str) -> Mapping[str, FieldDescriptor]:
    """The parameters of RopeScaling member `kind`, by name."""
    return pb.RopeScaling.DESCRIPTOR.fields_by_name[kind].message_type \
        .fields_by_name


def is_hf_rope_dict(value: Any) -> bool:
    """Whether `value` is HF's rope dict (rope_scaling / rope_parameters as
    config.json holds them: {"rope_type": "yarn", "factor": 4.0, ...})
    rather than a RopeScaling dict ({"yarn": {"factor": 4.0}})."""
    return isinstance(value, Mapping) and ("rope_type" in value
                                           or "type" in value)


def _hf_scaling(params: Mapping[str, Any], path: str,
                original: Any = None, original_path: str = ""
                ) -> Tuple[Optional[pb.RopeScaling], str]:
    """(the RopeScaling HF's rope dict `params` describes, None for plain
    RoPE; its rope type). `original`, when not None, is the
    original_max_position_embeddings that wins over the dict's (read at
    `original_path`). Unknown types and keys are InvalidInputError naming
    `path`.key and listing the valid ones."""
    key = "rope_type" if "rope_type" in params else "type"
    name = params.get(key)
    name = "default" if name is None else name
    if not isinstance(name, str) or name not in _HF_ROPE_TYPES:
        raise InvalidInputError(f"{path}.{key}",
                                f"{name!r} is not a rope type Phasor "
                                f"computes; supported: {_HF_SUPPORTED}")
    kind = _HF_ROPE_TYPES[name]
    fields = _scaling_fields(kind) if kind else {}
    for item in params:
        if item not in fields and item not in _HF_COMMON_KEYS:
            own = ", ".join(fields) or "none"
            raise InvalidInputError(
                f"{path}.{item}",
                f"is not a key of rope type {name!r}; its parameters: {own}; "
                f"and for every type: {', '.join(_HF_COMMON_KEYS)}")
    if kind is None:
        return None, name
    scaling = pb.RopeScaling()
    member = getattr(scaling, kind)
    fill(member, {k: v for k, v in params.items() if k in fields}, path)
    if original is not None and "original_max_position_embeddings" in fields:
        member.original_max_position_embeddings = _scalar(
            fields["original_max_position_embeddings"], original,
            original_path)
    return scaling, name


def _hf_sections(rope: pb.RopeSpec, params: Mapping[str, Any],
                 path: str) -> None:
    """M-RoPE's mrope_section / mrope_interleaved from HF's rope dict."""
    fill(rope, {k: params[k] for k in ("mrope_section", "mrope_interleaved")
                if params.get(k) is not None}, path)


def rope_config(rotary_dim: int = 0, base: Optional[float] = None,
                layout: Any = None, scaling: Any = None,
                fold_attention_factor: Optional[bool] = None,
                max_position_embeddings: int = 0,
                seq_len: int = 0) -> pb.EncoderSpec:
    """The EncoderSpec the RoPE methods' keywords describe (apply_rope,
    rope_tables, describe), each checked as spec= is: a wrong value or key
    is InvalidInputError naming the keyword ("scaling.llama3.factr") and
    listing what is allowed.

    scaling takes a RopeScaling message, its text format, a dict of its
    fields ({"yarn": {"factor": 4.0, "original_max_position_embeddings":
    4096}}), or HF's rope dict as config.json holds it (rope_scaling or
    rope_parameters, e.g. {"rope_type": "llama3", "factor": 8.0, ...}; told
    apart by its rope_type or type key). An HF dict's rope_theta is the base
    unless base= is given (they must then agree), its mrope_section and
    mrope_interleaved are the spec's, and its partial_rotary_factor needs
    rotary_dim= (the head size is not known here; rope_spec_from_hf reads it
    from the whole config).
    """
    rope = pb.RopeSpec()
    for name, value in (("rotary_dim", rotary_dim), ("base", base),
                        ("layout", layout),
                        ("fold_attention_factor", fold_attention_factor),
                        ("max_position_embeddings", max_position_embeddings),
                        ("seq_len", seq_len)):
        if value is not None:
            setattr(rope, name, _scalar(_ROPE_FIELDS[name], value, name))
    if scaling is None:
        return pb.EncoderSpec(rope=rope)
    if not is_hf_rope_dict(scaling):
        fill(rope.scaling, scaling, "scaling")
        return pb.EncoderSpec(rope=rope)
    message, name = _hf_scaling(scaling, "scaling")
    if message is not None:
        rope.scaling.CopyFrom(message)
    theta = scaling.get("rope_theta")
    if theta is not None:
        theta = _scalar(_ROPE_FIELDS["base"], theta, "scaling.rope_theta")
        if base is None:
            rope.base = theta
        elif theta != rope.base:
            raise InvalidInputError("scaling.rope_theta",
                                    f"{theta!r} disagrees with base="
                                    f"{rope.base!r}; give one of them")
    if (scaling.get("partial_rotary_factor") is not None
            and name != "proportional" and not rope.rotary_dim):
        raise InvalidInputError(
            "scaling.partial_rotary_factor",
            "sets the rotary dimension from the head size, which scaling= "
            "does not know: give rotary_dim=int(head_dim * "
            "partial_rotary_factor), or take the spec from "
            "rope_spec_from_hf(config)")
    _hf_sections(rope, scaling, "scaling")
    return pb.EncoderSpec(rope=rope)


def _hf_number(value: Any, path: str, integer: bool = False) -> float:
    """A config's number (int when `integer`), or InvalidInputError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise InvalidInputError(path, f"expected a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise InvalidInputError(path, f"expected an integer, got {value!r}")
    return int(value) if integer else float(value)


def _check_layer_type(layer_type: Optional[str], names: Sequence[str],
                      why: str) -> None:
    """Refuses a missing layer_type, or one not among `names`."""
    if layer_type is None:
        raise InvalidInputError("layer_type",
                                f"{why}: pass layer_type= one of "
                                f"{', '.join(names)}")
    if layer_type not in names:
        raise InvalidInputError("layer_type",
                                f"{layer_type!r}: {why}; one of "
                                f"{', '.join(names)}")


def rope_spec_from_hf(config: Any,
                      layer_type: Optional[str] = None) -> pb.RopeSpec:
    """The RopeSpec of an HF transformers model's attention, from its
    config: the dict of config.json, or a PretrainedConfig (its to_dict()).

        with open("config.json") as f:
            spec = rope_spec_from_hf(json.load(f))
        q, k, attention_factor = client.apply_rope(query, key, spec=spec)

    Read as HF's modeling_rope_utils.py (main) reads the config:
      rope dict   rope_scaling, else rope_parameters; its rope_type (or the
                  older type) picks the scaling, "default" (or none) none;
                  its keys are RopeScaling's fields of that type
      base        the dict's rope_theta, else the config's, else 10000
      rotary_dim  int(head_dim * partial_rotary_factor) (the dict's factor,
                  else the config's, else 1), head_dim the config's, else
                  hidden_size // num_attention_heads; for proportional the
                  whole head_dim, the factor being a scaling parameter
      max_position_embeddings  the config's
      original_max_position_embeddings (yarn, longrope, llama3)  the
                  config's top-level one (Phi-3 keeps it there), else the
                  dict's, else max_position_embeddings
      mrope_section, mrope_interleaved  the spec's (M-RoPE)
      layout      HALF (HF's rotate_half); the attention factor is folded
                  into the result, as HF does
    A multimodal config's text_config is read when the top level has none
    of rope_theta, rope_scaling, rope_parameters, head_dim, hidden_size,
    max_position_embeddings.

    layer_type: models whose layer types turn differently need the layer
    type ("full_attention", "sliding_attention", as the config's
    layer_types spell them): a rope dict keyed by layer type (Gemma 3 and 4
    in rope_parameters; a sliding layer without rope_theta takes
    rope_local_base_freq), or Gemma 3's older rope_local_base_freq (sliding
    layers: plain RoPE at that base; full-attention layers: rope_theta and
    rope_scaling). Without layer_type such a config is InvalidInputError
    listing its layer types. A config with one RoPE for every layer takes
    any layer_type its layer_types lists.

    Only what the config holds is read: a config.json that leaves a value
    to its model class's default is read with HF's generic defaults, so
    prefer AutoConfig.from_pretrained(...) when it writes only what differs.
    Raises InvalidInputError naming the config key
    ("config.rope_scaling.low_freq_factr") for an unknown rope type or key,
    listing the supported ones.
    """
    if not isinstance(config, Mapping) and callable(
            getattr(config, "to_dict", None)):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise InvalidInputError("config", f"expected an HF config (the dict "
                                          f"of config.json, or a "
                                          f"PretrainedConfig), got "
                                          f"{type(config).__name__}")
    path = "config"
    text = config.get("text_config")
    if isinstance(text, Mapping) and not any(k in config
                                             for k in _HF_TEXT_KEYS):
        config, path = text, "config.text_config"

    # convert_rope_params_to_dict: `rope_scaling or rope_parameters`.
    key = "rope_scaling" if config.get("rope_scaling") else "rope_parameters"
    params = config.get(key) or {}
    params_path = f"{path}.{key}"
    if not isinstance(params, Mapping):
        raise InvalidInputError(params_path,
                                f"expected a dict, got {params!r}")
    theta_fallback = config.get("rope_theta")
    theta_fallback_path = f"{path}.rope_theta"
    per_layer = bool(params) and all(isinstance(v, Mapping) or v is None
                                     for v in params.values())
    local_base = config.get("rope_local_base_freq")
    if per_layer:
        _check_layer_type(layer_type, sorted(params),
                          f"{params_path} is per layer type")
        params = params[layer_type] or {}
        params_path = f"{params_path}.{layer_type}"
        if layer_type == "sliding_attention" and local_base is not None:
            theta_fallback = local_base
            theta_fallback_path = f"{path}.rope_local_base_freq"
    elif local_base is not None:
        _check_layer_type(layer_type, _GEMMA3_LAYER_TYPES,
                          f"{path}.rope_local_base_freq gives the sliding "
                          f"layers their own base")
        if layer_type == "sliding_attention":
            params, params_path = {}, f"{path}.rope_local_base_freq"
            theta_fallback = local_base
            theta_fallback_path = params_path
    elif layer_type is not None and config.get("layer_types") is not None:
        listed = sorted(set(config["layer_types"]))
        if layer_type not in listed:
            raise InvalidInputError("layer_type",
                                    f"{layer_type!r} is not in "
                                    f"{path}.layer_types: "
                                    f"{', '.join(listed)}")

    # standardize_rope_params: a top-level original length wins over the
    # dict's when one RoPE serves all layers; a per-layer dict keeps its own.
    # Both fall back to max_position_embeddings.
    top_original = (None if per_layer
                    else config.get("original_max_position_embeddings"))
    if top_original is not None:
        original = top_original
        original_path = f"{path}.original_max_position_embeddings"
    elif params.get("original_max_position_embeddings") is not None:
        original = params["original_max_position_embeddings"]
        original_path = f"{params_path}.original_max_position_embeddings"
    else:
        original = config.get("max_position_embeddings")
        original_path = f"{path}.max_position_embeddings"
    scaling, name = _hf_scaling(params, params_path, original, original_path)

    if params.get("rope_theta") is not None:
        theta, theta_path = params["rope_theta"], f"{params_path}.rope_theta"
    elif theta_fallback is not None:
        theta, theta_path = theta_fallback, theta_fallback_path
    else:
        theta, theta_path = _HF_DEFAULT_THETA, f"{path}.rope_theta"

    head_key = "head_dim"
    if (name == "proportional" and layer_type == "full_attention"
            and config.get("global_head_dim")):
        head_key = "global_head_dim"  # Gemma 4's full-attention head size
    if config.get(head_key):
        head_dim = _hf_number(config[head_key], f"{path}.{head_key}", True)
    elif config.get("hidden_size") and config.get("num_attention_heads"):
        head_dim = (_hf_number(config["hidden_size"], f"{path}.hidden_size",
                               True)
                    // _hf_number(config["num_attention_heads"],
                                  f"{path}.num_attention_heads", True))
    else:
        raise InvalidInputError(f"{path}.head_dim",
                                "missing: the config needs head_dim, or "
                                "hidden_size and num_attention_heads")
    if params.get("partial_rotary_factor") is not None:
        partial, partial_path = (params["partial_rotary_factor"],
                                 f"{params_path}.partial_rotary_factor")
    else:
        partial, partial_path = (config.get("partial_rotary_factor"),
                                 f"{path}.partial_rotary_factor")
    rope = pb.RopeSpec(layout=pb.RopeSpec.HALF)
    rope.base = _scalar(_ROPE_FIELDS["base"], theta, theta_path)
    if name == "proportional":
        rope.rotary_dim = head_dim
        if partial is not None and "partial_rotary_factor" not in params:
            scaling.proportional.partial_rotary_factor = _hf_number(
                partial, partial_path)
    else:
        factor = 1.0 if partial is None else _hf_number(partial, partial_path)
        rope.rotary_dim = int(head_dim * factor)
    if config.get("max_position_embeddings") is not None:
        rope.max_position_embeddings = _scalar(
            _ROPE_FIELDS["max_position_embeddings"],
            config["max_position_embeddings"],
            f"{path}.max_position_embeddings")
    if scaling is not None:
        rope.scaling.CopyFrom(scaling)
    _hf_sections(rope, params, params_path)
    return rope
