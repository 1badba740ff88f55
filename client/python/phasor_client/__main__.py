"""`python -m phasor_client`: the common calls of phasor-client, from Python.

    python -m phasor_client [flags] <command> [flags]

Commands and flag names are those of the C++ CLI (client/cli/main.cc), so a
command line works with either: health, list-profiles, encode-positions,
encode-observations, describe. Arrays are read from and written to .npy or
CSV files (by extension); without --out a result is printed.

Exit status, as phasor-client's: 0 on success, 1 when the call (or reading
or writing a file) fails, 2 on a usage error.
"""

import argparse
import sys
from typing import Callable, Dict, Optional, Sequence, Tuple

import grpc
import numpy as np
from google.protobuf import text_format

from . import _stubs
from .client import EncoderClient, field_violations

_PROGRAM = "python -m phasor_client"


def _csv_has_header(path: str) -> bool:
    """True when the first line holds a cell that is neither empty nor a
    number (a column name)."""
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    for cell in first.strip().split(","):
        cell = cell.strip()
        if not cell:
            continue
        try:
            float(cell)
        except ValueError:
            return True
    return False


def read_array(path: str, dtype: Optional[str] = None) -> np.ndarray:
    """An array from a .npy file, or from a CSV file of numbers (one row
    per line, an optional header line, an empty cell = NaN).

    dtype "int64" reads integers exactly (nanosecond timestamps exceed
    float64's 2^53). A cell that is not a number is an error, never NaN.
    """
    if path.endswith(".npy"):
        array = np.load(path, allow_pickle=False)
        return array.astype(dtype) if dtype else array
    skip = 1 if _csv_has_header(path) else 0
    if dtype == "int64":
        return np.loadtxt(path, delimiter=",", dtype=np.int64, skiprows=skip,
                          ndmin=1)

    def cell(text: str) -> float:
        text = text.strip()
        return float(text) if text else float("nan")

    with open(path, encoding="utf-8") as f:
        rows = [[cell(c) for c in line.rstrip("\n").split(",")]
                for number, line in enumerate(f)
                if number >= skip and line.strip()]
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise ValueError(f"{path}: rows have {sorted(widths)} cells")
    array = np.array(rows, dtype=np.float64)
    return array[:, 0] if array.ndim == 2 and array.shape[1] == 1 else array


def write_array(path: str, array: np.ndarray) -> None:
    """Writes `array` to .npy (any dtype), else CSV (2-D at most)."""
    if path.endswith(".npy"):
        np.save(path, array, allow_pickle=False)
        return
    np.savetxt(path, np.atleast_1d(array), delimiter=",", fmt="%.9g")


def _emit(array: np.ndarray, args: argparse.Namespace, what: str) -> None:
    if args.out:
        write_array(args.out, array)
        print(f"{what}: {array.dtype} {tuple(array.shape)} -> {args.out}")
        return
    print(f"{what}: {array.dtype} {tuple(array.shape)}")
    with np.printoptions(precision=args.precision, suppress=True,
                         threshold=args.max_rows * args.max_columns,
                         edgeitems=max(1, args.max_rows // 2), linewidth=120):
        print(array)


def _spec_text(args: argparse.Namespace) -> Optional[str]:
    """--spec: protobuf text, or @FILE holding it (as the C++ CLI)."""
    if not args.spec:
        return None
    if args.spec.startswith("@"):
        with open(args.spec[1:], encoding="utf-8") as f:
            return f.read()
    return args.spec


def run_health(client: EncoderClient, args: argparse.Namespace) -> int:
    """Prints "server: SERVING" (or the --service's status)."""
    status = client.health(args.service)
    print(f"{args.service or 'server'}: {status}")
    return 0 if status == "SERVING" else 1


def run_list_profiles(client: EncoderClient,
                      args: argparse.Namespace) -> int:
    """Prints the server's named encoder configurations."""
    del args
    profiles = client.list_profiles()
    if not profiles:
        print("no profiles (start the server with --profiles FILE)")
    for profile in profiles:
        print(f"{profile.name:<24} {profile.description}".rstrip())
        print(f"    spec: {text_format.MessageToString(profile.spec, as_one_line=True)}")
    return 0


def run_encode_positions(client: EncoderClient,
                         args: argparse.Namespace) -> int:
    """Encodings [N, dim] for --count/--start/--step or --positions FILE."""
    positions = read_array(args.positions) if args.positions else None
    count = args.count if args.count >= 0 else None
    if positions is None and count is None:
        raise ValueError("give --count or --positions")
    encodings = client.encode_positions(
        positions, count=count, start=args.start, step=args.step,
        dim=args.dim or None, base=args.base, layout=args.layout or None,
        frequencies=args.frequencies or None,
        learned_table=args.learned_table or None,
        profile=args.profile or None, spec=_spec_text(args),
        output_dtype=args.output_dtype or "float32")
    _emit(encodings, args, "encodings")
    return 0


def run_encode_observations(client: EncoderClient,
                            args: argparse.Namespace) -> int:
    """Features [T, F] of wide observations (--timestamps, --values)."""
    if not args.timestamps or not args.values:
        raise ValueError("give --timestamps and --values (.npy or CSV)")
    if not (args.spec or args.profile):
        raise ValueError("give --spec (TemporalSpec text) or --profile")
    timestamps = read_array(args.timestamps, "int64")
    values = read_array(args.values)
    mask = read_array(args.mask).astype(np.uint8) if args.mask else None
    names = [n for n in args.channel_names.split(",") if n] \
        if args.channel_names else None
    result = client.encode_observations(
        timestamps, values, mask, spec=_spec_text(args),
        profile=args.profile or None, channel_names=names,
        output_dtype=args.output_dtype or "float32")
    for block in result.schema:
        print(f"  {block.block:<20} offset {block.offset:<5} width "
              f"{block.width:<5} {block.meaning}".rstrip())
    _emit(result.features, args, "features")
    if args.state_out:
        with open(args.state_out, "w", encoding="utf-8") as f:
            f.write(text_format.MessageToString(result.state))
    return 0


def run_describe(client: EncoderClient, args: argparse.Namespace) -> int:
    """Prints the frequency ladder, unambiguous range and nearest code."""
    response = client.describe(
        dim=args.dim or None, rotary_dim=args.rotary_dim or None,
        base=args.base, spec=_spec_text(args), profile=args.profile or None,
        num_offsets=args.num_offsets, offset_step=args.offset_step)
    unit = response.unit or "positions"
    print(f"frequency ladder ({len(response.frequencies)} pairs, unit: {unit})")
    print(f"{'pair':>6}  {'frequency (rad/' + unit + ')':>24}  "
          f"{'wavelength (' + unit + ')':>24}")
    for j, (frequency, wavelength) in enumerate(
            zip(response.frequencies, response.wavelengths)):
        print(f"{j:>6}  {frequency:>24.10g}  {wavelength:>24.10g}")
    print(f"unambiguous range: {response.unambiguous_range:.10g} {unit}")
    print(f"nearest code: distance {response.nearest_code_distance:.10g} at "
          f"offset {response.nearest_code_offset} {unit}")
    if args.show_similarity:
        for k, value in enumerate(response.similarity):
            print(f"  similarity[{k}] = {value:.10g}")
    return 0


# name -> (summary, runner); the names and order of client/cli/main.cc.
COMMANDS: Dict[str, Tuple[str, Callable[[EncoderClient, argparse.Namespace], int]]] = {
    "encode-positions": (
        "sinusoidal or learned encodings [N, dim] (--count/--positions, "
        "--dim)", run_encode_positions),
    "encode-observations": (
        "time features of irregular observations (--timestamps, --values, "
        "--spec)", run_encode_observations),
    "describe": ("frequency ladder, unambiguous range, similarity curve",
                 run_describe),
    "list-profiles": ("the server's named encoder configurations",
                      run_list_profiles),
    "health": ("grpc.health.v1 status of the server or --service",
               run_health),
}


def _connection_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Flags every command takes, before or after the command name. On the
    subcommands their defaults are suppressed, so a flag given before the
    command is not reset by the subparser."""
    def default(value):
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("connection and output")
    group.add_argument("--target", default=default("localhost:50051"),
                       help="server address (default localhost:50051)")
    group.add_argument("--deadline_ms", type=int, default=default(30000),
                       help="deadline of every call, ms (default 30000)")
    group.add_argument("--max_message_bytes", type=int, default=default(None),
                       help="message limit both ways (default 64 MiB or "
                            "$PHASOR_MAX_MESSAGE_BYTES)")
    group.add_argument("--tls", action="store_true", default=default(False))
    group.add_argument("--tls_ca", default=default(""))
    group.add_argument("--tls_cert", default=default(""))
    group.add_argument("--tls_key", default=default(""))
    group.add_argument("--tls_server_name", default=default(""))
    group.add_argument("--token_file", default=default(""))
    group.add_argument("--out", default=default(""),
                       help="write the result array here (.npy or CSV)")
    group.add_argument("--max_rows", type=int, default=default(16))
    group.add_argument("--max_columns", type=int, default=default(8))
    group.add_argument("--precision", type=int, default=default(6))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `python -m phasor_client`."""
    parser = argparse.ArgumentParser(
        prog=_PROGRAM, description="Calls a phasor-server.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               f"  {_PROGRAM} health\n"
               f"  {_PROGRAM} encode-positions --count 8 --dim 16\n"
               f"  {_PROGRAM} encode-positions --count 4096 --dim 512 "
               "--out pe.npy\n"
               f"  {_PROGRAM} describe --dim 64\n"
               f"  {_PROGRAM} encode-observations --timestamps t.csv "
               "--values v.csv --spec 'temporal { gaps {} }'")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {_stubs.PROJECT_VERSION}")
    _connection_flags(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="<command>")
    commands.required = True
    for name, (summary, _) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=summary)
        _connection_flags(sub, suppress=True)
        config = sub.add_argument_group("configuration")
        if name in ("encode-positions", "encode-observations", "describe"):
            config.add_argument("--profile", default="",
                                help="name of a server-side profile")
            config.add_argument("--spec", default="",
                                help="EncoderSpec protobuf text, or @FILE")
        if name in ("encode-positions", "describe"):
            config.add_argument("--dim", type=int, default=0,
                                help="sinusoidal width (even)")
            config.add_argument("--base", type=float, default=None,
                                help="frequency base (server default 10000)")
        if name == "encode-positions":
            config.add_argument("--positions", default="",
                                help="positions [N] (.npy or CSV)")
            config.add_argument("--start", type=int, default=0)
            config.add_argument("--count", type=int, default=-1)
            config.add_argument("--step", type=int, default=1)
            config.add_argument("--layout", default="",
                                help="interleaved, split_sin_cos or "
                                     "split_cos_sin")
            config.add_argument("--frequencies", default="",
                                help="vaswani or tensor2tensor")
            config.add_argument("--learned_table", default="")
        if name in ("encode-positions", "encode-observations"):
            config.add_argument("--output_dtype", default="",
                                help="float32 (default), float16, bfloat16")
        if name == "encode-observations":
            config.add_argument("--timestamps", default="",
                                help="row times [T], int64 ns since the "
                                     "Unix epoch (.npy or CSV)")
            config.add_argument("--values", default="",
                                help="values [T, C], NaN or an empty CSV "
                                     "cell = not observed")
            config.add_argument("--mask", default="",
                                help="observed mask [T, C]")
            config.add_argument("--channel_names", default="",
                                help="comma-separated channel names")
            config.add_argument("--state_out", default="",
                                help="write the series state (text format)")
        if name == "describe":
            config.add_argument("--rotary_dim", type=int, default=0)
            config.add_argument("--num_offsets", type=int, default=0)
            config.add_argument("--offset_step", type=float, default=None)
            config.add_argument("--show_similarity", action="store_true")
        if name == "health":
            config.add_argument("--service", default="",
                                help="a service name; empty = the server")
    return parser


def _client(args: argparse.Namespace) -> EncoderClient:
    return EncoderClient(
        args.target, deadline_seconds=args.deadline_ms / 1000.0,
        max_message_bytes=args.max_message_bytes, tls=args.tls,
        tls_ca=args.tls_ca or None, tls_cert=args.tls_cert or None,
        tls_key=args.tls_key or None,
        tls_server_name=args.tls_server_name or None,
        token_file=args.token_file or None)


def _describe_rpc_error(error: grpc.RpcError) -> str:
    text = f"{error.code().name}: {error.details()}"
    for field, description in field_violations(error):
        text += f"\n  {field}: {description}"
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one command; returns the exit status (0, 1 failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # --help, --version, usage errors.
        return int(exit_request.code or 0)
    runner: Callable[[EncoderClient, argparse.Namespace], int] = \
        COMMANDS[args.command][1]
    try:
        client = _client(args)
    except (OSError, ValueError) as error:
        print(f"{_PROGRAM}: {error}", file=sys.stderr)
        return 2
    try:
        with client:
            return runner(client, args)
    except grpc.RpcError as error:
        print(f"{_PROGRAM} {args.command}: {_describe_rpc_error(error)}",
              file=sys.stderr)
    except (OSError, ValueError, text_format.ParseError) as error:
        print(f"{_PROGRAM} {args.command}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
