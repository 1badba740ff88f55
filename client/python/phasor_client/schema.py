"""One name per feature column, from the response schema.

The server's schema lists runs of columns (block, offset, width, meaning);
core/compose.cc TemporalFeatureLayout fixes the order inside each run, and
feature_names() spells it out:

  content              content.0 .. content.{d-1}        (embeddings)
  content.values       content.values.<ch>               (one per channel)
  content.mask         content.mask.<ch>
  time                 time.sin_0, time.cos_0, time.sin_1, ... (interleaved
                       per period, shortest period first)
  time2vec             time2vec.linear, time2vec.sin_1 .. time2vec.sin_k
  gaps.global_delta    gaps.global_delta; SINUSOIDAL: gaps.global_delta.sin_0,
                       gaps.global_delta.cos_0, ...
  gaps.global_first_flag  (FLAG policy) gaps.global_first_flag
  gaps.delta           gaps.delta.<ch> channel-major; SINUSOIDAL:
                       gaps.delta.<ch>.sin_0, gaps.delta.<ch>.cos_0, ...
  gaps.first_flag      gaps.first_flag.<ch>               (FLAG policy)
  gaps.mask            gaps.mask.<ch>
  gaps.last_value      gaps.last_value.<ch>
  calendar.<field>     CYCLIC: calendar.<field>.sin, calendar.<field>.cos;
                       Fourier order K > 1: calendar.<field>.sin_1,
                       calendar.<field>.cos_1, ... .sin_K, .cos_K;
                       LINEAR / INDEX, years and flags: calendar.<field>
  calendar.utc_offset, calendar.dst, calendar.holidays,
  calendar.holidays.days_since, calendar.holidays.days_until,
  calendar.holidays.<set>[.days_since|.days_until]   (one column each)

<ch> is the channel's name (channel_names, else its number). Under combine
SUM every block spans the same d_model columns, which hold their sum: the
names are sum.0 .. sum.{d-1}. A block this client does not know gets
<block>.0, <block>.1, ... (or <block> for one column).

Thread-safety: pure functions.
"""

import re
from typing import List, Optional, Sequence

# Entries whose columns run over the channels, and how many per channel.
_PER_CHANNEL = ("content.values", "content.mask", "gaps.delta",
                "gaps.first_flag", "gaps.mask", "gaps.last_value")
_CHANNEL_MAJOR = re.compile(r"channel-major, (\d+) each")


def _sin_cos(prefix: str, width: int) -> List[str]:
    names = []
    for k in range(width // 2):
        names += [f"{prefix}.sin_{k}", f"{prefix}.cos_{k}"]
    return names


def _num_channels(schema) -> Optional[int]:
    for entry in schema:
        if entry.block in ("content.values", "content.mask", "gaps.first_flag",
                           "gaps.mask", "gaps.last_value"):
            return int(entry.width)
        if entry.block == "gaps.delta":
            match = _CHANNEL_MAJOR.search(entry.meaning)
            per = int(match.group(1)) if match else 1
            return int(entry.width) // max(per, 1)
    return None


def feature_names(schema: Sequence, channel_names: Optional[Sequence] = None
                  ) -> List[str]:
    """One name per feature column, in column order (see the module
    docstring). schema: the response's SchemaEntry list (e.g.
    Features.schema or Panel.schema); channel_names: the C channel names
    sent, or None to number the channels 0..C-1."""
    schema = list(schema)
    if not schema:
        return []
    if all(e.meaning.startswith("summed: ") for e in schema):
        return [f"sum.{i}" for i in range(int(schema[0].width))]
    channels = None
    if channel_names is not None:
        channels = [str(name) for name in channel_names]
    else:
        count = _num_channels(schema)
        channels = [str(c) for c in range(count or 0)]
    names: List[str] = []
    for entry in schema:
        block, width = entry.block, int(entry.width)
        if len(names) != entry.offset:
            raise ValueError(f"schema entry {block} starts at column "
                             f"{entry.offset}, after {len(names)} named ones")
        if block in _PER_CHANNEL:
            if not channels or width % len(channels):
                raise ValueError(f"schema entry {block} has {width} columns "
                                 f"for {len(channels)} channels")
            per = width // len(channels)
            for channel in channels:
                prefix = f"{block}.{channel}"
                names += [prefix] if per == 1 else _sin_cos(prefix, per)
        elif block in ("time", "gaps.global_delta") and width > 1:
            names += _sin_cos(block, width)
        elif block == "time2vec":
            names += ["time2vec.linear"] + [f"time2vec.sin_{k}"
                                            for k in range(1, width)]
        elif block.startswith("calendar.") and width == 2:
            names += [f"{block}.sin", f"{block}.cos"]
        elif block.startswith("calendar.") and width % 2 == 0:
            for k in range(1, width // 2 + 1):
                names += [f"{block}.sin_{k}", f"{block}.cos_{k}"]
        elif width == 1:
            names.append(block)
        else:
            names += [f"{block}.{i}" for i in range(width)]
    return names
