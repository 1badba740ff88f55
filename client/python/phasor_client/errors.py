"""PhasorError: the one exception type the client raises for a failed call.

Every server error (any gRPC status other than OK, on unary calls, streams and
split panels alike) reaches the caller as a PhasorError carrying

    error.code()              grpc.StatusCode, e.g. INVALID_ARGUMENT
    error.details()           the server's message, with the field path
    error.field_violations()  [(field, description)] from google.rpc.BadRequest

and input the client refuses before sending anything (a timestamp dtype it
cannot read without doubt, a NaT, a malformed DataFrame or spec dict) raises
InvalidInputError, a PhasorError with code INVALID_ARGUMENT and one field
violation naming the argument and row. A server error that encode_frame can
place in the caller's DataFrame is a FrameError, a PhasorError that also
carries the place as data (series_id, index_label, row, column).

Field paths are data too: parse_field_path reads the server's wire form
("observations.series[3].values[5]") into (name, index) segments and
format_field_path writes them back, so that code renumbering or locating a
path works on segments, never on the text of a message; a message about a
renumbered path is rendered again from the field violation
(render_field_message).

Compatibility: PhasorError subclasses grpc.RpcError (and grpc.Call, so
code()/details()/trailing_metadata() work as on gRPC's own error), so
`except grpc.RpcError` and phasor_client.field_violations(error) keep
working. InvalidInputError also subclasses ValueError and TypeError, which is
what the client raised for such input before.

Thread-safety: instances are immutable after construction.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import grpc

from . import _stubs

_modules = _stubs.load()
_status_pb2 = _modules.status_pb2
_error_details_pb2 = _modules.error_details_pb2

_DETAILS_KEY = "grpc-status-details-bin"

# gRPC metadata: (key, value) pairs; values of "-bin" keys are bytes.
Metadata = Sequence[Tuple[str, Union[str, bytes]]]

# One step of a field path: a name and, for a repeated field, the index
# ("values[5]" is ("values", 5), "observations" is ("observations", None)).
Segment = Tuple[str, Optional[int]]


def _index_of(text: str) -> Optional[int]:
    """The int of a wire index ("5"), or None for anything the server does
    not write there (signs, leading zeros, non-ASCII digits)."""
    if text.isascii() and text.isdigit() and str(int(text)) == text:
        return int(text)
    return None


def parse_field_path(path: str) -> List[Segment]:
    """The segments of a field path in the server's wire form: dot-separated
    names, each optionally followed by [i] indices (google.rpc.BadRequest's
    convention, as phasor-server writes it).

    "observations.series[3].values[5]" gives
    [("observations", None), ("series", 3), ("values", 5)]; a second index
    ("a[1][2]") is a segment with an empty name, ("a", 1), ("", 2). A
    component that is not of that form (a capped path's "...(12 more
    bytes)") is kept whole as a name with index None, so
    format_field_path(parse_field_path(p)) == p for every string p.
    """
    segments: List[Segment] = []
    for component in path.split("."):
        name, bracket, rest = component.partition("[")
        indices = (rest[:-1].split("][")
                   if bracket and name and rest.endswith("]") else None)
        numbers = ([_index_of(text) for text in indices]
                   if indices is not None else [None])
        if indices is None or None in numbers:
            segments.append((component, None))
            continue
        segments.append((name, numbers[0]))
        segments.extend(("", number) for number in numbers[1:])
    return segments


def format_field_path(segments: Sequence[Segment]) -> str:
    """The wire form of segments (parse_field_path's inverse)."""
    components: List[str] = []
    for name, index in segments:
        text = name if index is None else f"{name}[{index}]"
        if not name and index is not None and components:
            components[-1] += text  # A further index of the same field.
        else:
            components.append(text)
    return ".".join(components)


def render_field_message(field: str, description: str) -> str:
    """The message of an error about `field`: "field: description", as
    phasor-server renders it from the same two parts (core/errors.h
    RenderFieldMessage)."""
    return f"{field}: {description}"


def bad_request_violations(trailing_metadata: Optional[Metadata]
                           ) -> List[Tuple[str, str]]:
    """[(field, description)] of the google.rpc.BadRequest details in the
    grpc-status-details-bin trailer, or [] when there is none."""
    for key, value in trailing_metadata or ():
        if key != _DETAILS_KEY:
            continue
        status = _status_pb2.Status.FromString(value)
        violations = []
        for detail in status.details:
            bad_request = _error_details_pb2.BadRequest()
            if detail.Unpack(bad_request):
                violations += [(v.field, v.description)
                               for v in bad_request.field_violations]
        return violations
    return []


class PhasorError(grpc.RpcError, grpc.Call):
    """A failed Phasor call: gRPC code, message and BadRequest violations.

    Wraps the grpc.RpcError the channel raised (kept as `rpc_error`, None for
    input refused by the client); the wrapper is what the caller sees.
    """

    def __init__(self, code: grpc.StatusCode, message: str,
                 violations: Sequence[Tuple[str, str]] = (),
                 rpc_error: Optional[grpc.RpcError] = None) -> None:
        """An error with `code`, `message` (details()), the BadRequest
        `violations` [(field, description)] and the grpc.RpcError it wraps
        (None for input the client refused)."""
        super().__init__(message)
        self._code = code
        self._message = message
        self._violations = list(violations)
        self.rpc_error = rpc_error

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> PhasorError:
        """The PhasorError for a grpc.RpcError (itself if it is one)."""
        if isinstance(error, PhasorError):
            return error
        code = error.code() if hasattr(error, "code") else \
            grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        trailers = (error.trailing_metadata()
                    if hasattr(error, "trailing_metadata") else ())
        return cls(code, details or "", bad_request_violations(trailers),
                   error)

    # -- what callers read -------------------------------------------------

    @property
    def message(self) -> str:
        """The server's (or the client's) message; same as details()."""
        return self._message

    def code(self) -> grpc.StatusCode:
        """The gRPC status code."""
        return self._code

    def details(self) -> str:
        """The status message, naming the offending field."""
        return self._message

    def field_violations(self) -> List[Tuple[str, str]]:
        """[(field, description)] from the google.rpc.BadRequest detail."""
        return list(self._violations)

    # -- the rest of grpc.Call, for code written against gRPC's error ------

    def trailing_metadata(self) -> Metadata:
        """The call's trailing metadata (the BadRequest detail included);
        () for input refused by the client."""
        if self.rpc_error is not None and hasattr(self.rpc_error,
                                                  "trailing_metadata"):
            return self.rpc_error.trailing_metadata()
        return ()

    def initial_metadata(self) -> Metadata:
        """The call's initial metadata; () for input refused by the
        client."""
        if self.rpc_error is not None and hasattr(self.rpc_error,
                                                  "initial_metadata"):
            return self.rpc_error.initial_metadata()
        return ()

    def debug_error_string(self) -> str:
        """gRPC's debug string for the failed call; the message for input
        refused by the client."""
        if self.rpc_error is not None and hasattr(self.rpc_error,
                                                  "debug_error_string"):
            return self.rpc_error.debug_error_string()
        return self._message

    def is_active(self) -> bool:
        """False: the call has ended."""
        return False

    def time_remaining(self) -> Optional[float]:
        """None: an ended call has no deadline left to report."""
        return None

    def cancel(self) -> bool:
        """False: an ended call cannot be cancelled."""
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """False, and `callback` is not registered: the call has ended
        (grpc.RpcContext.add_callback's contract)."""
        return False

    def __str__(self) -> str:
        return f"{self._code.name}: {self._message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._code}, {self._message!r}, "
                f"violations={self._violations!r})")


class InvalidInputError(PhasorError, ValueError, TypeError):
    """Input the client refuses before sending: code INVALID_ARGUMENT, one
    violation (field, description), e.g. ("timestamps", "float64 ...")."""

    def __init__(self, field: str, description: str) -> None:
        """`field` names the argument (and row, "timestamps[3]"),
        `description` what is wrong with it; the message is
        "field: description"."""
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT,
                         render_field_message(field, description),
                         [(field, description)])


class FrameError(PhasorError):
    """A server error that encode_frame placed in the caller's DataFrame.

    The server numbers what it refuses in the panel encode_frame sent
    (series in order of first appearance, each series' rows sorted by time:
    "observations.series[3].values[5]"); a FrameError says the same in the
    frame's terms. Where each part is known, else None:

        series_id    the series' id (None for a frame without a series
                     column, or an error about no one series)
        index_label  the row's label in df.index
        row          the row's position in df (0-based, input order)
        column       the column: the value column (wide: the channel),
                     the time or channel column; None for the index
        wire_field   the server's own field path, as sent

    code() is the server's; details() names the frame's place first and
    then quotes the server's message unchanged; field_violations() is one
    (field, description) in the frame's terms ("df['temp'][7]",
    "df.index[7]", "states['a'].channels[0].last_seen_ns",
    "time_zones['a']"). The server's own BadRequest stays in
    trailing_metadata() and rpc_error.
    """

    def __init__(self, code: grpc.StatusCode, message: str,
                 violations: Sequence[Tuple[str, str]],
                 rpc_error: Optional[grpc.RpcError], *, series_id: Any,
                 index_label: Any, row: Optional[int], column: Any,
                 wire_field: str) -> None:
        """PhasorError's arguments plus the place (see the class
        docstring)."""
        super().__init__(code, message, violations, rpc_error)
        self.series_id = series_id
        self.index_label = index_label
        self.row = row
        self.column = column
        self.wire_field = wire_field
